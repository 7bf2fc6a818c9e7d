package manifestdiff

import (
	"strings"
	"testing"
)

// A SOPS file's values show as sealed, changed where their ciphertext changed; nothing of the
// ciphertext or the SOPS metadata shows.
func TestSOPSValuesShowAsSealed(t *testing.T) {
	r := NewRedactorWithKey("golden")
	doc := func(pw, user string) string {
		return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: ENC[AES256_GCM,data:" + pw +
			"]\n  user: ENC[AES256_GCM,data:" + user + "]\nsops:\n  mac: ENC[AES256_GCM,data:" + pw + "]\n  version: 3.13.3\n"
	}
	d := Diff(r, doc("AAAA", "UUUU"), doc("BBBB", "UUUU"), "base", "head")
	for _, want := range []string{"-  password: (sealed)", "+  password: (sealed, changed)"} {
		if !strings.Contains(d, want) {
			t.Errorf("no %q in:\n%s", want, d)
		}
	}
	if strings.Contains(d, "ENC[") || !strings.Contains(d, " user: (sealed)\n") || strings.Contains(d, "mac") {
		t.Errorf("ciphertext, an unchanged value or metadata shows:\n%s", d)
	}
	if added := Diff(r, "", doc("CCCC", "UUUU"), "base", "head"); !strings.Contains(added, "+  password: (sealed, new)") {
		t.Errorf("a new file:\n%s", added)
	}
}
