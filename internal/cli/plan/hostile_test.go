package plan

import (
	"bytes"
	"strings"
	"testing"
)

// A repository's text reaches a terminal and a pull request's comment: in the text form no
// escape sequence or bidirectional override of it survives, and in the comment no line of a
// diff closes its code block (the rest would render as the repository's Markdown).
func TestPlanOutputsHoldHostileText(t *testing.T) {
	diff := "--- a\n+++ b\n-data: \x1b[2J\x1b]0;owned\x07old\n+data: \u202enew\n+````\n+</details>\n+## Approved by security\n"
	r := &Report{Base: "aaaaaaaa", Head: "bbbbbbbb", Clusters: 1, Bundles: []BundleReport{
		{Name: "web\x1b[31m", Groups: []Group{{Change: Changed, Clusters: []string{"fleet-default/dev-1"}, Diff: diff}}},
		{Name: "broken", Error: "fleet.yaml: \x1b[1A\x1b[2Kall good\nsecond line"},
	}}
	var text bytes.Buffer
	if err := Text(&text, r, false); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\x07", "\u202e"} {
		if strings.Contains(text.String(), bad) {
			t.Errorf("text output holds %q:\n%q", bad, text.String())
		}
	}
	var md bytes.Buffer
	if _, err := Markdown(&md, r, 0, ""); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	if !strings.Contains(out, "\n`````diff\n") || !strings.Contains(out, "\n`````\n</details>") {
		t.Fatalf("the fence is not longer than the diff's backticks:\n%s", out)
	}
	// Inside the block the diff stays as it is; outside it nothing of it appears.
	open := strings.Index(out, "`````diff\n")
	closing := strings.Index(out[open+10:], "\n`````\n")
	if closing < 0 || !strings.Contains(out[open:open+10+closing], "+## Approved by security") {
		t.Fatalf("the diff is not whole inside its block:\n%s", out)
	}
	if strings.Contains(out[open+10+closing:], "Approved by security") {
		t.Fatalf("the diff's text reaches the comment outside its block:\n%s", out)
	}
}
