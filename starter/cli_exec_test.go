package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestReportExec: what exec prints and how it exits for each kind of
// result, in text (streamed or not) and --json.
func TestReportExec(t *testing.T) {
	full := sandboxapi.ExecResult{ExitCode: 259, Stdout: []byte("out\n"), Stderr: []byte("err\n"), TimedOut: true, Truncated: true,
		StdoutBytes: 10, StderrBytes: 20, OutputID: "o-1", Cancelled: true}
	for _, tc := range []struct {
		name             string
		res              sandboxapi.ExecResult
		asJSON, streamed bool
		stdout, stderr   string
		exit             int
	}{
		{"ok", sandboxapi.ExecResult{Stdout: []byte("hi\n")}, false, false, "hi\n", "", 0},
		{"text", full, false, false, "out\n", "sandboxctl: command cancelled\nerr\nsandboxctl: command timed out\n" +
			"sandboxctl: output truncated (stdout 10 bytes, stderr 20 bytes in all)\n" +
			"sandboxctl: the whole output is kept: sandboxctl output " + testWorkspaceID + " o-1\n", 3},
		{"streamed", full, false, true, "", "sandboxctl: command cancelled\nsandboxctl: command timed out\n", 3},
		{"json", sandboxapi.ExecResult{ExitCode: 1, Stdout: []byte("x")}, true, false, `"stdout": "eA=="`, "", 1},
		{"exit 256 is 0", sandboxapi.ExecResult{ExitCode: 256}, false, false, "", "", 0},
	} {
		c, _, stdout, stderr := testCLI(tc.asJSON)
		err := c.reportExec(testWorkspaceID, tc.res, tc.streamed)
		if got := exitCode(err); got != tc.exit {
			t.Errorf("%s: exit %d (%v), want %d", tc.name, got, err, tc.exit)
		}
		if err != nil && !errors.As(err, new(exitCodeError)) {
			t.Errorf("%s: %v is not an exit code", tc.name, err)
		}
		if tc.asJSON {
			if !strings.Contains(stdout.String(), tc.stdout) || stderr.Len() != 0 {
				t.Errorf("%s: stdout %q, stderr %q", tc.name, stdout, stderr)
			}
			continue
		}
		if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
			t.Errorf("%s: stdout %q, stderr %q; want %q, %q", tc.name, stdout, stderr, tc.stdout, tc.stderr)
		}
	}
}

func TestReadFileArg(t *testing.T) {
	c, _, _, _ := testCLI(false)
	c.stdin = strings.NewReader("0123456789")
	if b, err := c.readFileArg("-", 4); err != nil || string(b) != "0123" {
		t.Errorf("stdin with limit 4: %q, %v", b, err)
	}
	p := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(p, []byte("file bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := c.readFileArg(p, 4); err != nil || string(b) != "file bytes" {
		t.Errorf("file: %q, %v", b, err)
	}
	if _, err := c.readFileArg(filepath.Join(t.TempDir(), "none"), 4); !errors.Is(err, os.ErrNotExist) || exitCode(err) != exitError {
		t.Errorf("missing file: %v (exit %d)", err, exitCode(err))
	}
}
