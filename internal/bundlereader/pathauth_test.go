package bundlereader

import (
	"os"
	"testing"
)

func TestParsePathCredentials(t *testing.T) {
	dir := t.TempDir()
	got, err := ParsePathCredentials([]byte("charts/private/:\n  username: u\n  password: p\n  caBundle: PEM\nother:\n  insecureSkipVerify: true\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := got["charts/private"]
	if !ok || a.Username != "u" || a.Password != "p" || a.CAFile == "" {
		t.Fatalf("charts/private: %+v (all: %+v)", a, got)
	}
	if ca, _ := os.ReadFile(a.CAFile); string(ca) != "PEM" {
		t.Fatalf("CA file holds %q", ca)
	}
	if !got["other"].InsecureSkipTLSVerify {
		t.Fatalf("other: %+v", got["other"])
	}
	if _, err := ParsePathCredentials([]byte("x:\n  user: typo\n"), dir); err == nil {
		t.Fatal("an unknown field must be refused")
	}
}
