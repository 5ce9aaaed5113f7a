package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// TestExitCodeOfEveryKind: exit 2 for InvalidArgument and InvalidWorkspacePath
// (FileNotFound, its sub-kind, included), 1 for every other kind, decided by
// the kind and never by the message.
func TestExitCodeOfEveryKind(t *testing.T) {
	invalid := map[string]bool{"InvalidArgument": true, "InvalidWorkspacePath": true, "FileNotFound": true}
	for _, k := range sandboxapi.Kinds() {
		want := exitError
		if invalid[k.Type] {
			want = exitInvalid
		}
		for _, err := range []error{
			sandboxapi.Errorf(k, "unknown flag: --x accepts 2 arg(s)"), // words the old substring match took for a usage error
			fmt.Errorf("resume: %w", sandboxapi.Errorf(k, "wrapped")),
			k,
		} {
			if got := exitCode(err); got != want {
				t.Errorf("%s (%v): exit %d, want %d", k.Type, err, got, want)
			}
		}
	}
}

func TestExitCodeOfOtherErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{exitCodeError{code: 3}, 3},
		{fmt.Errorf("exec: %w", exitCodeError{code: 130}), 130},
		{exitCodeError{code: 0}, exitOK},
		{errors.New("open /tmp/flag-file: no such file or directory"), exitError}, // "flag" in a message is no usage error
		{errors.New(`unknown command "x"`), exitError},                            // nor is the text of cobra's
		{usageError{error: errors.New(`unknown command "x" for "sandboxctl"`)}, exitInvalid},
		{usageError{error: errors.New("accepts 2 arg(s), received 1")}, exitInvalid},
		{usageError{error: sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "bad --timeout"), flags: true}, exitInvalid},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestMainExitCodesWithoutAServer: what cobra and pflag refuse exits 2 (as a
// UsageError with --json, or the flag value's kind), before anything
// connects; an untyped error of the command itself exits 1 whatever its
// words.
func TestMainExitCodesWithoutAServer(t *testing.T) {
	const ws = testWorkspaceID
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"zzzzzz"}, exitInvalid, "error: unknown command \"zzzzzz\" for \"sandboxctl\"\n"},
		{[]string{"read", ws}, exitInvalid, "error: accepts 2 arg(s), received 1\n"},
		{[]string{"read", ws, "--json"}, exitInvalid, `{"error":{"message":"accepts 2 arg(s), received 1","type":"UsageError"}}` + "\n"},
		{[]string{"acquire", "--json"}, exitInvalid, `{"error":{"message":"required flag(s) \"project\", \"repo\", \"user\" not set","type":"UsageError"}}` + "\n"},
		{[]string{"exec", ws, "-x", "--", "true"}, exitInvalid, "error: unknown shorthand flag: 'x' in -x (an argument that starts with '-' goes after --, " +
			"e.g. `sandboxctl exec WS -- ls -la`; paths and search patterns may not start with '-': name the file ./-n, search for \\-x)\n"},
		{[]string{"exec", ws, "--bogus", "--json", "--", "true"}, exitInvalid, `{"error":{"message":"unknown flag: --bogus (an argument that starts with '-' goes after --, ` +
			"e.g. `sandboxctl exec WS -- ls -la`; paths and search patterns may not start with '-': name the file ./-n, search for \\\\-x)\",\"type\":\"UsageError\"}}\n"},
		{[]string{"exec", ws, "--timeout", "1500ms", "--", "true"}, exitInvalid, "error: InvalidArgument: invalid argument \"1500ms\" for \"--timeout\" flag: duration 1.5s: want a whole number of seconds\n"},
		{[]string{"log", ws, "-n", "x"}, exitInvalid, "error: invalid argument \"x\" for \"-n, --max-count\" flag: strconv.ParseInt: parsing \"x\": invalid syntax\n"},
		{[]string{"rollback", ws, "x", "--json"}, exitInvalid, `{"error":{"message":"checkpoint id \"x\": want a number (sandboxctl checkpoint list ` + ws + `)","type":"InvalidArgument"}}` + "\n"},
		// The command's own untyped error: exit 1, even with "flag" in its text.
		{[]string{"exec", ws, "--stdin", "/nonexistent/flag-file", "--", "true"}, exitError, "error: open /nonexistent/flag-file: no such file or directory\n"},
	} {
		var stdout, stderr strings.Builder
		code := Main(tc.args, strings.NewReader(""), &stdout, &stderr)
		if code != tc.code || stderr.String() != tc.stderr || stdout.Len() != 0 {
			t.Errorf("sandboxctl %s: exit %d, stderr %q, stdout %q; want exit %d, stderr %q", strings.Join(tc.args, " "), code, stderr.String(), stdout.String(), tc.code, tc.stderr)
		}
	}
}

// TestFlagErrorKeepsPflagsWords: a flag value's typed error reads as pflag's
// message without the kind's prefix in the middle, for a flag with and
// without a shorthand.
func TestFlagErrorKeepsPflagsWords(t *testing.T) {
	for _, short := range []string{"", "t"} {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		var d int
		fs.VarP(secondsValue{&d}, "timeout", short, "")
		perr := fs.Parse([]string{"--timeout", "1500ms"})
		if perr == nil {
			t.Fatal("--timeout 1500ms parsed")
		}
		err := flagError(nil, perr)
		want := strings.Replace(perr.Error(), "InvalidArgument: ", "", 1)
		var ue usageError
		if sandboxapi.Message(err) != want || !sandboxapi.IsInvalidArgument(err) || !errors.As(err, &ue) || !ue.flags {
			t.Errorf("shorthand %q: %v (message %q, want %q)", short, err, sandboxapi.Message(err), want)
		}
	}
}
