package bundlereader

import (
	"bytes"
	"strings"
	"testing"
)

func TestResourcesRoundTrip(t *testing.T) {
	files := []File{
		{Name: "small.yaml", Content: []byte("kind: ConfigMap\n")},
		{Name: "big.yaml", Content: []byte(strings.Repeat("x: y\n", compressAbove))},
		{Name: "chart.tgz", Content: []byte{0x1f, 0x8b, 0xff, 0x00, 0xfe}},
	}
	res, err := ToResources(files)
	if err != nil {
		t.Fatal(err)
	}
	wantEnc := []string{"", EncodingBase64Gzip, EncodingBase64Gzip}
	for i, r := range res {
		if r.Encoding != wantEnc[i] {
			t.Errorf("%s: encoding %q, want %q", r.Name, r.Encoding, wantEnc[i])
		}
		got, err := Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, files[i].Content) {
			t.Errorf("%s does not round-trip", r.Name)
		}
	}
	if len(res[1].Content) >= len(files[1].Content)/10 {
		t.Errorf("repetitive text must compress well: %d bytes from %d", len(res[1].Content), len(files[1].Content))
	}
	res[0].Encoding = "rot13"
	if _, err := Decode(res[0]); err == nil || !strings.Contains(err.Error(), "small.yaml") {
		t.Errorf("unknown encodings are errors naming the resource, got %v", err)
	}
}
