package sandbox

import (
	"errors"
	"github.com/sandboxcore/sandboxcore/sandboxapi"
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"2s": 2 * time.Second, "1m30s": 90 * time.Second, "72h": 72 * time.Hour, "1500ms": 1500 * time.Millisecond,
		"600": 600 * time.Second, "0": 0, " 30 ": 30 * time.Second, "1.5": 1500 * time.Millisecond, "0s": 0,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "-2s", "abc", "2 s", "NaN", "Inf", "0x10", "1e400", "1_000", "10y"} {
		if d, err := ParseDuration(in); !errors.Is(err, sandboxapi.ErrInvalidArgument) {
			t.Errorf("ParseDuration(%q) = %v, %v; want InvalidArgument", in, d, err)
		}
	}
	if n, err := WholeSeconds("timeout", 2*time.Minute); err != nil || n != 120 {
		t.Errorf("WholeSeconds(2m) = %d, %v", n, err)
	}
	if _, err := WholeSeconds("timeout", 1500*time.Millisecond); !errors.Is(err, sandboxapi.ErrInvalidArgument) {
		t.Errorf("WholeSeconds(1.5s) = %v; want InvalidArgument", err)
	}
}

func TestTruncatePatch(t *testing.T) {
	a := "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n"
	b := "diff --git a/b b/b\n--- a/b\n+++ b/b\n@@ -1 +1 @@\n-p\n+q\n"
	p := a + b
	for max, want := range map[int]string{len(p): p, len(p) + 10: p, len(p) - 1: a, len(a): a, len(a) + 3: a, len(a) - 1: a[:strings.LastIndexByte(a[:len(a)-1], '\n')+1], 0: ""} {
		got, cut := TruncatePatch(p, max)
		if got != want || cut != (want != p) {
			t.Errorf("TruncatePatch(max %d) = %q, %v; want %q", max, got, cut, want)
		}
		if len(got) > max && max < len(p) {
			t.Errorf("TruncatePatch(max %d) is %d bytes", max, len(got))
		}
	}
}

func TestResolveSubmoduleURL(t *testing.T) {
	for _, c := range []struct{ super, rel, want string }{
		{"https://h/team/project.git", "../dep.git", "https://h/team/dep.git"},
		{"https://h/team/project.git", "./dep.git", "https://h/team/project.git/dep.git"},
		{"https://h/team/project", "../../other/dep", "https://h/other/dep"},
		{"https://h:8443/a/b", "../c", "https://h:8443/a/c"},
		{"file:///tmp/x/team/project", "../dep", "file:///tmp/x/team/dep"},
		{"https://h/team/project.git", "https://elsewhere/x/y.git", "https://elsewhere/x/y.git"},
		{"https://h/team/project.git", "ext::sh -c evil", "ext::sh -c evil"}, // absolute: ParseRepoURL refuses it
	} {
		got, err := ResolveSubmoduleURL(c.super, c.rel)
		if err != nil || got != c.want {
			t.Errorf("ResolveSubmoduleURL(%q, %q) = %q, %v; want %q", c.super, c.rel, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{"https://h/a", "../../../x"}, {"https://h/a", ""}, {"git@h:a/b", "../c"}} {
		if got, err := ResolveSubmoduleURL(c[0], c[1]); !errors.Is(err, sandboxapi.ErrInvalidArgument) {
			t.Errorf("ResolveSubmoduleURL(%q, %q) = %q, %v; want InvalidArgument", c[0], c[1], got, err)
		}
	}
	if _, ok := ParseLFSPointer([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("a", 64) + "\nsize 12\n")); !ok {
		t.Error("a pointer is not recognised")
	}
	for _, bad := range []string{"", "version https://git-lfs.github.com/spec/v1\nsize 12\noid sha256:" + strings.Repeat("a", 64) + "\n",
		"version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("A", 64) + "\nsize 12\n",
		"version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("a", 64) + "\nsize 012\n",
		"version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("a", 64) + "\nsize 12"} {
		if _, ok := ParseLFSPointer([]byte(bad)); ok {
			t.Errorf("ParseLFSPointer(%q) accepted", bad)
		}
	}
}
