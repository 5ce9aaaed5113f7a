package replica

import (
	"os/exec"
	"testing"
)

// ExecFunction carries every byte string of env and argv verbatim, several
// invalid-UTF-8 words included, through a real sh.
func TestExecFunctionPassesWordsVerbatim(t *testing.T) {
	env := []string{"A=plain 'quoted' $x", "B=\xff\xfe", "PATH=/usr/bin:/bin"}
	cmd := []string{"/bin/sh", "-c", `printf '%s|%s|%s|%s\n' "$A" "$B" "$1" "$2"`, "sh", "\xc3\x28", "\xa0\xa1 two"}
	script := ExecFunction(env, cmd) + "x_exec\n"
	out, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, script)
	}
	want := "plain 'quoted' $x|\xff\xfe|\xc3\x28|\xa0\xa1 two\n"
	if string(out) != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
