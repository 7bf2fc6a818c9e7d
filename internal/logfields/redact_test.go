package logfields

import (
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRedactCutsSecretsOnly(t *testing.T) {
	secret := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}.String() + " "
	for _, c := range []struct{ in, want string }{
		{"DesiredSet - Patch " + secret + "ns/s for set -- [PATCH:{\"stringData\":{\"token\":\"x\"}}]",
			"DesiredSet - Patch " + secret + "ns/s for set" + Redacted},
		{"DesiredSet - Updated " + secret + "ns/s for set -- application/merge-patch+json {}",
			"DesiredSet - Updated " + secret + "ns/s for set" + Redacted},
		{"DesiredSet - Created " + secret + "ns/s for set", "DesiredSet - Created " + secret + "ns/s for set"},
		{"DesiredSet - Patch /v1, Kind=ConfigMap ns/c for set -- [PATCH:{}]", "DesiredSet - Patch /v1, Kind=ConfigMap ns/c for set -- [PATCH:{}]"},
		{"a line about /v1, Kind=Secret  -- x", "a line about /v1, Kind=Secret  -- x"},
	} {
		if got := redact(c.in); got != c.want {
			t.Errorf("redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRedactingFormatsTheCutLine(t *testing.T) {
	f := Redacting(&logrus.JSONFormatter{})
	e := logrus.NewEntry(logrus.New())
	e.Message = "DesiredSet - Patch /v1, Kind=Secret ns/s for set -- [PATCH:{\"data\":{\"token\":\"c2VjcmV0\"}}]"
	out, err := f.Format(e)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.Contains(got, "ns/s for set") || strings.Contains(got, "c2VjcmV0") {
		t.Errorf("formatted %s", got)
	}
}
