package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDesignLayoutMatchesTheTree: docs/DESIGN.md "Layout" names every Go
// package of the module (its directory, by its last element followed by a
// slash), and every directory it draws as a tree entry exists.
func TestDesignLayoutMatchesTheTree(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n## Layout\n")
	if !ok {
		t.Fatal(`docs/DESIGN.md has no "## Layout" section`)
	}
	_, block, ok := strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal(`docs/DESIGN.md "Layout" has no code block`)
	}

	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == "." {
			continue
		}
		if !strings.Contains(block, filepath.Base(rel)+"/") {
			t.Errorf("docs/DESIGN.md \"Layout\" does not name package %s", rel)
		}
	}

	// Tree entries: a name followed by a slash at the start of a line, its
	// indentation (two spaces a level) giving its parent; a line indented
	// deeper than one level below the last entry continues a description.
	entry := regexp.MustCompile(`^( *)([A-Za-z0-9_.-]+)/(\s|$)`)
	var parents []string
	for _, line := range strings.Split(block, "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		level := len(m[1]) / 2
		if len(m[1])%2 != 0 || level > len(parents) {
			continue // a description's continuation line
		}
		parents = append(parents[:level], m[2])
		path := filepath.Join(append([]string{root}, parents...)...)
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Errorf("docs/DESIGN.md \"Layout\" lists %s, which is not a directory of the tree", filepath.Join(parents...))
		}
	}
	if len(parents) == 0 {
		t.Error(`docs/DESIGN.md "Layout" draws no tree entries`)
	}
}

// TestMakeBuildShowsProgress: the first `make run` compiles the embedded
// Temporal server for minutes; `make build` (which `make run` runs) says
// so before it starts, and every `go build` lists packages as they compile
// (-v), so the terminal is never silent (`make -n`: nothing is built).
func TestMakeBuildShowsProgress(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "-n", "build")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	builds := 0
	for i, l := range lines {
		if !strings.Contains(l, " build ") || !strings.Contains(l, "go") {
			continue
		}
		builds++
		if !strings.Contains(l, " build -v ") {
			t.Errorf("%q: no -v, so a cold build is silent", l)
		}
		if builds == 1 && (i == 0 || !strings.Contains(strings.Join(lines[:i], "\n"), "several minutes")) {
			t.Errorf("no message before the first build says it takes minutes:\n%s", out)
		}
	}
	if builds != 3 {
		t.Errorf("want 3 go builds in make build, got %d:\n%s", builds, out)
	}
}

// TestMakeHelpListsEveryTarget: `make help` describes every target of the
// Makefile's .PHONY list, each by the `## ` comment on its line, so a
// target added without one is caught here.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var phony []string
	for _, l := range strings.Split(string(mk), "\n") {
		if rest, ok := strings.CutPrefix(l, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
		}
	}
	if len(phony) == 0 {
		t.Fatal("the Makefile has no .PHONY list")
	}
	cmd := exec.Command("make", "--no-print-directory", "help")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	described := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			described[f[0]] = true
		}
	}
	for _, target := range phony {
		if !described[target] {
			t.Errorf("make help does not describe %s: give its line a `## ` comment\n%s", target, out)
		}
	}
}
