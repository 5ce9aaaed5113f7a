package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text a workspace controls (file names, matched lines, git's messages,
// reasons naming paths) is printed for a person to read: a name holding a
// terminal escape, a carriage return or a newline could recolour the screen,
// erase its own line or forge another status line. These escape such runes
// (Go's \x1b, \r, \u202e forms) and leave everything printable as it is.

// printablePath is s with every rune that is not printable (per
// unicode.IsPrint: tabs, newlines, control and format characters such as
// bidi overrides) and every invalid UTF-8 byte escaped; for one-line fields
// (paths, names, ids).
func printablePath(s string) string { return escapeRunes(s, "") }

// printableText is printablePath keeping tabs (matched lines of a search).
func printableText(s string) string { return escapeRunes(s, "\t") }

// printableMessage is printablePath keeping tabs and newlines (error and
// reason texts, which may span lines).
func printableMessage(s string) string { return escapeRunes(s, "\t\n") }

func escapeRunes(s, keep string) string {
	clean := true
	for i, r := range s {
		if (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) || (!unicode.IsPrint(r) && !strings.ContainsRune(keep, r)) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r) || strings.ContainsRune(keep, r):
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}
