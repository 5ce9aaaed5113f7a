package main

import (
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

func TestFanoutFlags(t *testing.T) {
	var in sandboxapi.FanoutInput
	err := fanoutFlags(&in, []string{"a", "b:make test"}, []string{"b=fix the build", "a=x=y"}, "b,a", 90*time.Second)
	want := sandboxapi.FanoutInput{
		Tasks:         []sandboxapi.TaskSpec{{TaskID: "a", Instructions: "x=y"}, {TaskID: "b", Script: "make test", Instructions: "fix the build"}},
		AcceptTaskIDs: []string{"b", "a"}, TaskTimeoutS: 90,
	}
	if err != nil || !reflect.DeepEqual(in, want) {
		t.Errorf("got %+v, %v; want %+v", in, err, want)
	}
	var all sandboxapi.FanoutInput
	if err := fanoutFlags(&all, []string{"a"}, nil, "all", 0); err != nil || all.AcceptTaskIDs != nil || all.TaskTimeoutS != 0 {
		t.Errorf("--accept all: %+v, %v", all, err)
	}
	for _, bad := range []struct {
		tasks, instructions []string
		timeout             time.Duration
	}{
		{[]string{"bad id!"}, nil, 0},
		{[]string{"a"}, []string{"c=text"}, 0}, // no task c
		{[]string{"a"}, []string{"a"}, 0},      // no '='
		{[]string{"a"}, nil, 1500 * time.Millisecond},
		{[]string{"a"}, nil, -time.Second},
	} {
		var in sandboxapi.FanoutInput
		if err := fanoutFlags(&in, bad.tasks, bad.instructions, "all", bad.timeout); !sandboxapi.IsInvalidArgument(err) {
			t.Errorf("%+v: %v, want InvalidArgument", bad, err)
		}
	}
}

func TestNewFanoutID(t *testing.T) {
	a, b := newFanoutID(), newFanoutID()
	if !regexp.MustCompile(`^f-\d{8}-\d{6}-[0-9a-f]{12}$`).MatchString(a) || a == b {
		t.Errorf("ids %q, %q", a, b)
	}
	if err := sandboxapi.ValidateID("fan-out id", a); err != nil {
		t.Errorf("%q: %v", a, err)
	}
}
