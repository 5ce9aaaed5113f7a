package replica

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
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

// KillFunction kills a command's whole session, a process that moved to a
// process group of its own included (bash's job control puts every
// background job in one), under each shell at hand: a toolbox may run the
// cancel script with zsh or bash (Daytona's daemon does), not only sh.
func TestKillFunctionKillsTheSessionUnderEveryShell(t *testing.T) {
	ran := 0
	for _, shell := range []string{"/bin/sh", "/bin/bash", "/bin/zsh", "/usr/bin/zsh"} {
		if _, err := os.Stat(shell); err != nil {
			continue
		}
		ran++
		// A session: its leader, bash, and a sleep in a group of its own.
		leader := exec.Command("setsid", "bash", "-c", "set -m; sleep 300 & echo $!; wait")
		out, err := leader.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		child := strings.TrimSpace(line)
		if pgid, _ := syscall.Getpgid(mustAtoi(t, child)); pgid == leader.Process.Pid {
			t.Fatalf("the child is in the leader's group: the test proves nothing")
		}
		script := KillFunction + "x_kill " + strconv.Itoa(leader.Process.Pid) + "\n"
		if b, err := exec.Command(shell, "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", shell, err, b)
		}
		_ = leader.Wait()
		deadline := time.Now().Add(5 * time.Second)
		for alive(child) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(child) {
			_ = syscall.Kill(mustAtoi(t, child), syscall.SIGKILL)
			t.Fatalf("%s: the session's process in its own group survived x_kill", shell)
		}
	}
	if ran == 0 {
		t.Skip("no shell to try")
	}
}

// alive tells a process that runs (neither gone nor a zombie).
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
