package sessionrpc

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// released is the error an update meets while the session's run is ending,
// as the Temporal client returns it: an application error of the kind's
// type (the message is the workflow's, and is not what is recognised).
func released() error {
	return temporal.NewApplicationError("exec: session ws-1 is ending", sandboxapi.ErrSessionReleased.Type)
}

func TestReleasedIsRecognisedByKindNotText(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"raw application error of the kind", released(), true},
		{"typed", sandboxapi.Errorf(sandboxapi.ErrSessionReleased, "x"), true},
		{"typed, wrapped", fmt.Errorf("call: %w", sandboxapi.Errorf(sandboxapi.ErrSessionReleased, "x")), true},
		{"the parent kind is not released", sandboxapi.Errorf(sandboxapi.ErrWorkspaceUnavailable, "session is ending (released or closed)"), false},
		{"message text alone", errors.New("SessionReleased: session ws-1 was released"), false},
		{"another application error type", temporal.NewApplicationError("session released", sandboxapi.ErrWorkspaceLocked.Type), false},
		{"no running execution", serviceerror.NewNotFound("workflow not found"), false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := Released(c.err); got != c.want {
			t.Errorf("%s: Released(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestRunGoneIsTheServicesNotFound(t *testing.T) {
	if !RunGone(serviceerror.NewNotFound("workflow execution not found")) {
		t.Error("NotFound is not a gone run")
	}
	if !RunGone(fmt.Errorf("update: %w", serviceerror.NewNotFound("x"))) {
		t.Error("a wrapped NotFound is not a gone run")
	}
	for _, err := range []error{released(), sandboxapi.Errorf(sandboxapi.ErrWorkspaceNotFound, "no such workspace"), errors.New("not found"), nil} {
		if RunGone(err) {
			t.Errorf("RunGone(%v) = true", err)
		}
	}
}

func TestPolicyNext(t *testing.T) {
	gone := serviceerror.NewNotFound("workflow not found")
	other := temporal.NewApplicationError("bad path", sandboxapi.ErrInvalidWorkspacePath.Type)
	cases := []struct {
		name      string
		p         Policy
		attempt   int
		err       error
		resumable bool
		want      Step
	}{
		{"client: ending run is waited out", ClientPolicy, 0, released(), true, Wait},
		{"client: last retry used", ClientPolicy, 4, released(), true, Stop},
		{"client: gone run is resumed", ClientPolicy, 3, gone, true, Resume},
		{"client: gone run where no resume is possible", ClientPolicy, 0, gone, false, Stop},
		{"client: other errors stop", ClientPolicy, 0, other, true, Stop},
		{"client: success stops", ClientPolicy, 0, nil, true, Stop},
		{"start policy: eight retries", ClientStartPolicy, 7, released(), false, Wait},
		{"start policy: then stop", ClientStartPolicy, 8, released(), false, Stop},
		{"activity: ending run goes to the activity's retry", ActivityPolicy, 0, released(), true, Stop},
		{"activity: gone run is resumed", ActivityPolicy, 0, gone, true, Resume},
		{"activity: resumes are bounded", ActivityPolicy, 4, gone, true, Stop},
		{"zero policy sends once", Policy{}, 0, gone, true, Stop},
	}
	for _, c := range cases {
		if got := c.p.Next(c.attempt, c.err, c.resumable); got != c.want {
			t.Errorf("%s: Next(%d, %v, %v) = %v, want %v", c.name, c.attempt, c.err, c.resumable, got, c.want)
		}
	}
}

// The activities hand SessionReleased to their retry policy: it must be a
// retryable kind, or the fan-out step would fail for good.
func TestActivityPolicyReturnsAReleasedKindThatIsRetryable(t *testing.T) {
	if !ActivityPolicy.ReturnReleased || !sandboxapi.ErrSessionReleased.Retryable {
		t.Fatalf("ActivityPolicy.ReturnReleased = %v, SessionReleased retryable = %v", ActivityPolicy.ReturnReleased, sandboxapi.ErrSessionReleased.Retryable)
	}
	if ActivityPolicy.Backoff != 0 {
		t.Errorf("the activities pause in-process (%v)", ActivityPolicy.Backoff)
	}
}

func TestAttemptUpdateID(t *testing.T) {
	if got := AttemptUpdateID("sandbox-fanout/f1/run/t1/exec", 3); got != "sandbox-fanout/f1/run/t1/exec/3" {
		t.Errorf("AttemptUpdateID = %q", got)
	}
}

func TestNewUpdateIDIsRandom(t *testing.T) {
	a, b := NewUpdateID(), NewUpdateID()
	if a == b || len(a) != len("exec-")+24 {
		t.Errorf("NewUpdateID: %q, %q", a, b)
	}
}
