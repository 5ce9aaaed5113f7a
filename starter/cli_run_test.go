package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

const testWorkspaceID = "ws-0123456789abcdef01234567"

// testCLI is a cli whose client is made but never dialed: Session and the
// helpers need no server until a call is sent, and these calls send none.
func testCLI(asJSON bool) (*cli, *cobra.Command, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	c := &cli{asJSON: asJSON, stdout: &stdout, stderr: &stderr, sc: sandboxclient.New(nil, sandboxclient.Options{})}
	cmd := &cobra.Command{}
	cmd.SetContext(context.Background())
	return c, cmd, &stdout, &stderr
}

func TestRunSessionPrintsTextOrJSON(t *testing.T) {
	res := sandboxapi.CommitResult{Commit: "abc123", Branch: "agent/edits-c1"}
	text := func(c *cli) func(sandboxapi.CommitResult) error {
		return func(r sandboxapi.CommitResult) error {
			_, err := fmt.Fprintf(c.stdout, "committed %s on %s\n", r.Commit, r.Branch)
			return err
		}
	}
	for _, asJSON := range []bool{false, true} {
		c, cmd, stdout, stderr := testCLI(asJSON)
		var gotWS string
		err := runSession(c, cmd, testWorkspaceID, func(ctx context.Context, s *sandboxclient.Session) (sandboxapi.CommitResult, error) {
			gotWS = s.WorkspaceID()
			return res, nil
		}, text(c))
		if err != nil {
			t.Fatalf("json=%t: %v", asJSON, err)
		}
		if gotWS != testWorkspaceID {
			t.Errorf("json=%t: call got the session of %q", asJSON, gotWS)
		}
		want := "committed abc123 on agent/edits-c1\n"
		if asJSON {
			want = "{\n  \"commit\": \"abc123\",\n  \"branch\": \"agent/edits-c1\",\n  \"nothing_to_commit\": false\n}\n"
		}
		if stdout.String() != want || stderr.Len() != 0 {
			t.Errorf("json=%t: stdout %q stderr %q, want stdout %q", asJSON, stdout, stderr, want)
		}
	}
}

func TestRunSessionErrors(t *testing.T) {
	// A malformed workspace id is refused before call runs.
	c, cmd, stdout, _ := testCLI(false)
	called := false
	err := runSession(c, cmd, "not-a-workspace", func(context.Context, *sandboxclient.Session) (int, error) {
		called = true
		return 0, nil
	}, nil)
	if !sandboxapi.IsInvalidArgument(err) || called || stdout.Len() != 0 {
		t.Errorf("malformed id: err %v, call ran %t, stdout %q", err, called, stdout)
	}

	// call's error comes back unchanged and nothing is printed, in either mode.
	boom := sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "no such workspace")
	for _, asJSON := range []bool{false, true} {
		c, cmd, stdout, _ := testCLI(asJSON)
		err := runSession(c, cmd, testWorkspaceID, func(context.Context, *sandboxclient.Session) (int, error) {
			return 7, boom
		}, func(int) error { t.Error("text ran after a failed call"); return nil })
		if !errors.Is(err, boom) || stdout.Len() != 0 {
			t.Errorf("json=%t: err %v, stdout %q", asJSON, err, stdout)
		}
	}

	// text's error (search's exit 1) is returned in text mode only; a nil
	// text prints nothing.
	c, cmd, _, _ = testCLI(false)
	err = runSession(c, cmd, testWorkspaceID, func(context.Context, *sandboxclient.Session) (int, error) { return 0, nil },
		func(int) error { return exitCodeError{code: 1} })
	var ec exitCodeError
	if !errors.As(err, &ec) || ec.code != 1 {
		t.Errorf("text's exitCodeError: %v", err)
	}
	c, cmd, stdout, _ = testCLI(true)
	err = runSession(c, cmd, testWorkspaceID, func(context.Context, *sandboxclient.Session) ([]int, error) { return []int{}, nil },
		func([]int) error { return exitCodeError{code: 1} })
	if err != nil || stdout.String() != "[]\n" {
		t.Errorf("--json: err %v, stdout %q", err, stdout)
	}
	c, cmd, stdout, _ = testCLI(false)
	if err := runSession(c, cmd, testWorkspaceID, func(context.Context, *sandboxclient.Session) (int, error) { return 1, nil }, nil); err != nil || stdout.Len() != 0 {
		t.Errorf("nil text: err %v, stdout %q", err, stdout)
	}
}

func TestRunClientUsesTheClient(t *testing.T) {
	c, cmd, stdout, _ := testCLI(true)
	var got *sandboxclient.Client
	err := runClient(c, cmd, func(_ context.Context, sc *sandboxclient.Client) (map[string]int, error) {
		got = sc
		return map[string]int{"n": 2}, nil
	}, nil)
	if err != nil || got != c.sc || stdout.String() != "{\n  \"n\": 2\n}\n" {
		t.Errorf("err %v, client %p (want %p), stdout %q", err, got, c.sc, stdout)
	}
}
