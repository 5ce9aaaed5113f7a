package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestDurationFlags: every duration flag of sandboxctl takes a Go duration
// or plain seconds (exec --timeout 2s used to fail with a strconv error),
// and a bad value is an invalid argument (exit 2) naming the flag, before
// anything is sent.
func TestDurationFlags(t *testing.T) {
	root := (&cli{}).rootCommand()
	for _, tc := range []struct {
		path []string
		flag string
		ok   map[string]string // value → how the flag reads back
		bad  []string
	}{
		{[]string{"exec"}, "timeout", map[string]string{"2s": "2s", "600": "10m0s", "1m30s": "1m30s", "2h": "2h0m0s"}, []string{"1500ms", "-3", "soon", "1.5"}},
		{[]string{"fanout", "start"}, "timeout", map[string]string{"30m": "30m0s", "90": "1m30s", "1.5": "1.5s"}, []string{"-1s", "x"}},
		{[]string{"fanout", "watch"}, "interval", map[string]string{"2s": "2s", "5": "5s", "250ms": "250ms"}, []string{"-1"}},
		{[]string{"eviction", "run"}, "reply-timeout", map[string]string{"15m": "15m0s", "60": "1m0s"}, []string{"abc"}},
		{[]string{"pin"}, "for", map[string]string{"72h": "72h0m0s", "3600": "1h0m0s"}, []string{"-72h"}},
	} {
		cmd, _, err := root.Find(tc.path)
		if err != nil {
			t.Fatalf("%v: %v", tc.path, err)
		}
		f := cmd.Flags().Lookup(tc.flag)
		if f == nil {
			t.Fatalf("%v has no --%s", tc.path, tc.flag)
		}
		if f.Value.Type() != "duration" {
			t.Errorf("%v --%s is a %s flag", tc.path, tc.flag, f.Value.Type())
		}
		for in, want := range tc.ok {
			if err := f.Value.Set(in); err != nil {
				t.Errorf("%v --%s %s: %v", tc.path, tc.flag, in, err)
			} else if got := f.Value.String(); got != want {
				t.Errorf("%v --%s %s reads back %s, want %s", tc.path, tc.flag, in, got, want)
			}
		}
		for _, in := range tc.bad {
			if err := f.Value.Set(in); err == nil {
				t.Errorf("%v --%s %s was accepted", tc.path, tc.flag, in)
			}
		}
	}

	var stdout, stderr bytes.Buffer
	code := Main([]string{"exec", "ws-0123456789abcdef01234567", "--timeout", "1500ms", "--json", "--", "true"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitInvalid {
		t.Fatalf("exec --timeout 1500ms exits %d (stderr %q), want %d", code, stderr.String(), exitInvalid)
	}
	var e struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	if err := json.Unmarshal(stderr.Bytes(), &e); err != nil || e.Error.Type != "InvalidArgument" || !strings.Contains(e.Error.Message, "--timeout") || !strings.Contains(e.Error.Message, "whole number of seconds") {
		t.Errorf("exec --timeout 1500ms: %q (%v)", stderr.String(), err)
	}
}

// TestHelpShowsOneDefault: no flag's help reads "(default …) (default …)"
// (exec --timeout showed its own default and pflag's "0s").
func TestHelpShowsOneDefault(t *testing.T) {
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, line := range strings.Split(cmd.LocalFlags().FlagUsages(), "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("sandboxctl %s: %s", cmd.CommandPath(), strings.TrimSpace(line))
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk((&cli{}).rootCommand())
	exec, _, err := (&cli{}).rootCommand().Find([]string{"exec"})
	if err != nil {
		t.Fatal(err)
	}
	if u := exec.Flags().FlagUsages(); !strings.Contains(u, "(default 10m, at most 2h)\n") {
		t.Errorf("exec --timeout help: %s", u)
	}
}
