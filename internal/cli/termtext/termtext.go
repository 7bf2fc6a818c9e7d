// Package termtext keeps what others wrote (agents' status, downstream objects, a repository's
// files) from acting on a terminal: the CLI's text output goes through it, so an escape
// sequence in a message or a name cannot clear, recolour or rewrite the screen. (CLI)
package termtext

import (
	"io"
	"strings"
	"unicode"
)

// Printable drops the characters a terminal would act on rather than show: control characters
// (escape sequences start with one) and bidirectional overrides.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, s)
}

// Lines is Printable that keeps line breaks and tabs, for text of several lines (a diff).
func Lines(s string) string {
	return strings.Map(func(r rune) rune {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			return -1
		}
		return r
	}, s)
}

// Writer writes to w what Lines keeps of everything written.
func Writer(w io.Writer) io.Writer { return writer{w} }

type writer struct{ w io.Writer }

func (t writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, Lines(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}
