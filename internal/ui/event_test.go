package ui

import (
	"bytes"
	"strings"
	"testing"
)

// A page holds what agents and tenants wrote: a carriage return in it must not start a field of
// the event stream (an event's type, its id, the reconnection time).
func TestEventBodyStartsNoField(t *testing.T) {
	var b bytes.Buffer
	writeEvent(&b, "page", "<p>ok</p>\n<p>msg\revent: evil\r\nid: 9\rretry: 1</p>")
	// Read it as a browser does: \r\n, \r and \n each end a line.
	lines := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(b.String()), "\n")
	for _, l := range lines {
		if l == "" || strings.HasPrefix(l, "data: ") || l == "event: page" {
			continue
		}
		t.Fatalf("a line of the body became a field: %q in\n%q", l, b.String())
	}
	if !strings.Contains(b.String(), "data: event: evil\n") {
		t.Fatalf("the text is kept as data: %q", b.String())
	}
}
