package tools

import (
	"bytes"
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// text turns command or file bytes into JSON text: invalid UTF-8 becomes U+FFFD.
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// cutToRune drops an incomplete UTF-8 sequence at the end of b (at most
// three bytes), so that a page boundary never splits a character.
func cutToRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b // ASCII: complete
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// lastLine returns the last non-empty line of b, trimmed and cut at 120 runes.
func lastLine(b []byte) string {
	s := strings.TrimRight(text(b), "\r\n\t ")
	if i := strings.LastIndexAny(s, "\r\n"); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}

// viewFile renders a file's lines numbered ("%6d\t<line>"), lines start..end
// of viewRange when given ([start, end], 1-based, end -1 = the last line).
// A binary file is not shown. Errors: ErrInvalidArgument (a bad range).
func viewFile(p string, data []byte, viewRange []int) (EditorOutput, string, error) {
	out := EditorOutput{Command: "view", Path: p, Kind: "file", Bytes: int64(len(data))}
	if !sandboxapi.IsText(data) {
		if viewRange != nil {
			return EditorOutput{}, "", invalid("view_range", "%s is a binary file (%d bytes): it has no lines to show", p, len(data))
		}
		out.Text = fmt.Sprintf("(%s is a binary file of %d bytes; it is not shown)\n", p, len(data))
		return out, out.Text, nil
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	out.Lines = len(lines)
	from, to := 1, len(lines)
	if viewRange != nil {
		if len(viewRange) != 2 {
			return EditorOutput{}, "", invalid("view_range", "view_range is [start, end]")
		}
		from, to = viewRange[0], viewRange[1]
		if to == -1 {
			to = len(lines)
		}
		if from < 1 || from > max(len(lines), 1) || to < from || to > len(lines) && len(lines) > 0 {
			return EditorOutput{}, "", invalid("view_range", "view_range [%d, %d] is outside the file's %d lines (1-based; end -1 = the last line)", viewRange[0], viewRange[1], len(lines))
		}
	} else if to > MaxViewLines {
		to, out.Truncated = MaxViewLines, true
	}
	var b strings.Builder
	for n := from; n <= to && n <= len(lines); n++ {
		fmt.Fprintf(&b, "%6d\t%s\n", n, lines[n-1])
	}
	out.Text = b.String()
	head := fmt.Sprintf("%s, lines %d-%d of %d:\n", p, from, min(to, len(lines)), len(lines))
	switch {
	case len(lines) == 0:
		head = fmt.Sprintf("%s is empty.\n", p)
	case out.Truncated:
		head = fmt.Sprintf("%s, the first %d of %d lines (use view_range for the rest):\n", p, MaxViewLines, len(lines))
	}
	return out, head + out.Text, nil
}

// ignoreCase decides sandbox_search's case: "smart" (or empty) is
// case-insensitive unless the pattern has an upper-case letter outside
// escapes and classes like \S or \W (ripgrep's smart case), "sensitive" or
// "insensitive" as said. Errors: ErrInvalidArgument (another value, or a
// pattern that does not parse).
func ignoreCase(mode, pattern string, literal bool) (bool, error) {
	switch mode {
	case "insensitive":
		return true, nil
	case "sensitive":
		return false, nil
	case "", "smart":
	default:
		return false, invalid("case", "case %q: want smart, sensitive or insensitive", sandboxapi.Clip(mode, 40))
	}
	if literal {
		return !strings.ContainsFunc(pattern, unicode.IsUpper), nil
	}
	if _, err := syntax.Parse(pattern, syntax.Perl); err != nil {
		return false, invalid("pattern", "search pattern: %v", err)
	}
	return !hasUpperLiteral(pattern), nil
}

// hasUpperLiteral reports whether a regular expression names an upper-case
// letter itself: escapes (\S, \W, \x41, \p{Lu}, …) are not looked at, so
// that only letters written as letters (literals, [A-Z]) count.
func hasUpperLiteral(pattern string) bool {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '\\' && i+1 < len(pattern) {
			i++
			if c := pattern[i]; (c == 'p' || c == 'P' || c == 'x') && i+1 < len(pattern) && pattern[i+1] == '{' {
				if j := strings.IndexByte(pattern[i:], '}'); j > 0 {
					i += j
				}
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(pattern[i:])
		if unicode.IsUpper(r) {
			return true
		}
		i += size - 1
	}
	return false
}

// filterDiff keeps the sections of d's patch (and its file names) for the
// given workspace-relative files or directories. The patch is cut by the
// worker at sandboxapi.MaxDiffBytes before filtering: Truncated stays set.
// Errors: ErrInvalidWorkspacePath (a bad path).
func filterDiff(d sandboxapi.Diff, paths []string) (sandboxapi.Diff, error) {
	want := make([]string, 0, len(paths))
	for _, p := range paths {
		c, err := sandboxapi.CleanRelPath(p)
		if err != nil {
			return d, err
		}
		want = append(want, c)
	}
	match := func(f string) bool {
		for _, w := range want {
			if w == "." || f == w || strings.HasPrefix(f, w+"/") {
				return true
			}
		}
		return false
	}
	files := []string{}
	for _, f := range d.Files {
		if match(f) {
			files = append(files, f)
		}
	}
	var b bytes.Buffer
	keep := false
	for _, line := range strings.SplitAfter(d.Patch, "\n") {
		if strings.HasPrefix(line, "diff --git ") {
			f, ok := headerPath(line)
			keep = ok && slices.Contains(files, f)
		}
		if keep {
			b.WriteString(line)
		}
	}
	d.Patch, d.Files = b.String(), files
	d.TotalBytes = int64(b.Len())
	return d, nil
}

// headerPath is the path of a patch section's header line "diff --git a/P
// b/P" as the worker's diff writes it (no renames, so both sides name the
// same path; core.quotePath=true, so git C-quotes a path holding non-ASCII
// bytes, a quote or a backslash: "a/caf\303\251.txt"). An unquoted path may
// itself hold " b/", so it is found by length, not by searching. ok is
// false for a header of another shape.
func headerPath(line string) (path string, ok bool) {
	rest := strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	rest = strings.TrimPrefix(rest, "diff --git ")
	if strings.HasPrefix(rest, `"`) {
		qa, err := strconv.QuotedPrefix(rest)
		if err != nil || !strings.HasPrefix(rest[len(qa):], " ") {
			return "", false
		}
		a, err1 := strconv.Unquote(qa)
		b, err2 := strconv.Unquote(rest[len(qa)+1:])
		if err1 != nil || err2 != nil || !strings.HasPrefix(a, "a/") || b != "b/"+a[2:] {
			return "", false
		}
		return a[2:], true
	}
	// "a/" + P + " b/" + P
	if len(rest) < 5 || (len(rest)-5)%2 != 0 || !strings.HasPrefix(rest, "a/") {
		return "", false
	}
	p := rest[2 : 2+(len(rest)-5)/2]
	if rest[2+len(p):] != " b/"+p {
		return "", false
	}
	return p, true
}
