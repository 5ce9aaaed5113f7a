package main

import "testing"

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"src/main.go":          "src/main.go",
		"ünïcode ✓.txt":        "ünïcode ✓.txt",
		"evil\x1b[31mRED":      `evil\x1b[31mRED`,
		"x\n?? forged":         `x\n?? forged`,
		"y\rOVERWRITE":         `y\rOVERWRITE`,
		"a\tb":                 `a\tb`,
		"bidi\u202eexe.txt":    `bidi\u202eexe.txt`,
		"bad\xffbyte":          `bad\xffbyte`,
		"real \uFFFD replaced": "real \uFFFD replaced",
		"tag\U000E0041":        `tag\U000e0041`,
	} {
		if got := printablePath(in); got != want {
			t.Errorf("printablePath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := printableText("a\tb\x1b"); got != "a\tb\\x1b" {
		t.Errorf("printableText keeps tabs: %q", got)
	}
	if got := printableMessage("line1\nline2\r"); got != "line1\nline2\\r" {
		t.Errorf("printableMessage keeps newlines: %q", got)
	}
}
