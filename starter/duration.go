package main

import (
	"time"

	"github.com/sandboxcore/sandboxcore/internal/sandbox"
)

// durationValue is a pflag.Value for every duration flag of sandboxctl
// (exec --timeout, fanout --timeout and --interval, eviction run
// --reply-timeout, pin --for): a Go duration ("2s", "10m", "72h") or a plain
// number of seconds ("600"), parsed by sandbox.ParseDuration (README
// "Walkthrough").
type durationValue struct{ d *time.Duration }

// String renders the current value as a Go duration; zero (or unset) is
// "0", which pflag takes for "no default" and so leaves out of help texts
// (a flag's usage says what an unset flag means).
func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return v.d.String()
}

// Set parses s with sandbox.ParseDuration; the error names the accepted forms.
func (v durationValue) Set(s string) error {
	d, err := sandbox.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

// Type is shown in help texts.
func (durationValue) Type() string { return "duration" }

// secondsValue is durationValue for a wire field counted in whole seconds
// (ExecRequest.TimeoutS): "2s", "2m" and "120" are accepted, "1500ms" is not.
type secondsValue struct{ n *int }

// String renders the current value as a Go duration; zero (or unset) is
// "0", as for durationValue.String.
func (v secondsValue) String() string {
	if v.n == nil || *v.n == 0 {
		return "0"
	}
	return (time.Duration(*v.n) * time.Second).String()
}

// Set parses s with sandbox.ParseDuration and keeps it in whole seconds.
func (v secondsValue) Set(s string) error {
	d, err := sandbox.ParseDuration(s)
	if err != nil {
		return err
	}
	n, err := sandbox.WholeSeconds("duration", d)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

// Type is shown in help texts.
func (secondsValue) Type() string { return "duration" }
