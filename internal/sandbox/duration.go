package sandbox

import (
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseDuration reads a duration as every sandboxcore command-line flag and
// environment variable takes one (README "Configuration", docs/API.md
// "CLI"): a Go duration ("2s", "1m30s", "72h", "1500ms") or a plain,
// non-negative number of seconds ("600", "1.5"). Negative values, NaN,
// infinities and values beyond time.Duration's range are refused. Errors:
// ErrInvalidArgument naming the value.
func ParseDuration(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	if v == "" {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "empty duration: want a duration such as 30s, 20m or 6h, or a number of seconds")
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "duration %q is negative", sandboxapi.Clip(s, 64))
		}
		return d, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || strings.ContainsAny(v, "xXpP_") {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "duration %q: want a duration such as 30s, 20m or 6h, or a number of seconds", sandboxapi.Clip(s, 64))
	}
	if f < 0 {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "duration %q is negative", sandboxapi.Clip(s, 64))
	}
	if f > float64(math.MaxInt64)/float64(time.Second) {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "duration %q is too long", sandboxapi.Clip(s, 64))
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}

// WholeSeconds returns d as a whole number of seconds, for wire fields
// counted in seconds (ExecRequest.TimeoutS). Errors: ErrInvalidArgument when
// d is not a whole number of seconds (e.g. 1500ms), naming what.
func WholeSeconds(what string, d time.Duration) (int, error) {
	if d%time.Second != 0 {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s %s: want a whole number of seconds", what, d)
	}
	s := d / time.Second
	if s > math.MaxInt32 {
		return 0, sandboxapi.Errorf(sandboxapi.ErrInvalidArgument, "%s %s is too long", what, d)
	}
	return int(s), nil
}
