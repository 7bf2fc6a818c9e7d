package termtext

import (
	"bytes"
	"fmt"
	"testing"
)

func TestWriterKeepsLinesAndDropsWhatActsOnTheTerminal(t *testing.T) {
	var b bytes.Buffer
	fmt.Fprintf(Writer(&b), "a\tb\x1b[2J\r\nc\u202ed\x00\n")
	if got := b.String(); got != "a\tb[2J\ncd\n" {
		t.Fatalf("%q", got)
	}
	if got := Printable("x\ny\x1bz"); got != "xyz" {
		t.Fatalf("%q", got)
	}
}
