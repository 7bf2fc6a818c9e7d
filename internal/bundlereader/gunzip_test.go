package bundlereader

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A compressed payload that expands past MaxDecompressed (a gzip bomb: 65 MiB of zeros packs
// into about 64 KiB) is refused instead of read whole.
func TestGunzipRefusesABomb(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zero := make([]byte, 1<<20)
	for range (MaxDecompressed >> 20) + 1 {
		if _, err := zw.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.Len() > 1<<20 {
		t.Fatalf("the bomb is %d bytes packed", buf.Len())
	}
	_, err := Decode(fleet.BundleResource{Name: "bomb.yaml", Encoding: EncodingBase64Gzip, Content: base64.StdEncoding.EncodeToString(buf.Bytes())})
	if err == nil || !strings.Contains(err.Error(), "resource bomb.yaml: expands to more than 64 MiB") {
		t.Fatalf("got %v", err)
	}
	small, err := Gunzip(gz(t, "kind: ConfigMap\n"), "content x")
	if err != nil || string(small) != "kind: ConfigMap\n" {
		t.Fatalf("a small payload: %q %v", small, err)
	}
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
