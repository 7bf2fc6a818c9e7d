package bundlereader

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

const (
	// EncodingBase64Gzip marks content that is gzip-compressed, then base64-encoded.
	EncodingBase64Gzip = "base64+gz"
	// EncodingBase64 marks content that is base64-encoded.
	EncodingBase64 = "base64"
	// compressAbove is the size from which text files are compressed: Bundles live in etcd,
	// whose objects must stay well under its request limit.
	compressAbove = 64 << 10
)

// ToResources turns files into Bundle resources: text as is, binary or large files compressed.
func ToResources(files []File) ([]fleet.BundleResource, error) {
	return toResources(files, false)
}

// toResources is ToResources; with compressAll every file is gzipped, as fleet apply -c does.
func toResources(files []File, compressAll bool) ([]fleet.BundleResource, error) {
	out := make([]fleet.BundleResource, 0, len(files))
	for _, f := range files {
		if !compressAll && len(f.Content) <= compressAbove && utf8.Valid(f.Content) {
			out = append(out, fleet.BundleResource{Name: f.Name, Content: string(f.Content)})
			continue
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(f.Content); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		out = append(out, fleet.BundleResource{
			Name: f.Name, Encoding: EncodingBase64Gzip,
			Content: base64.StdEncoding.EncodeToString(buf.Bytes()),
		})
	}
	return out, nil
}

// Decode returns the bytes of a Bundle resource, whatever its encoding.
func Decode(r fleet.BundleResource) ([]byte, error) {
	switch r.Encoding {
	case "":
		return []byte(r.Content), nil
	case EncodingBase64:
		return base64.StdEncoding.DecodeString(r.Content)
	case EncodingBase64Gzip:
		raw, err := base64.StdEncoding.DecodeString(r.Content)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		return Gunzip(raw, "resource "+r.Name)
	}
	return nil, fmt.Errorf("resource %s: unknown encoding %q", r.Name, r.Encoding)
}

// MaxDecompressed bounds what one gzip payload (a compressed resource, a Content) may expand to:
// an object of at most a few MiB that unpacks to gigabytes is an attack on whoever reads it.
const MaxDecompressed = 64 << 20

// Gunzip decompresses data, refusing more than MaxDecompressed bytes; what names the payload in
// errors.
func Gunzip(data []byte, what string) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, MaxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(out) > MaxDecompressed {
		return nil, fmt.Errorf("%s: expands to more than %d MiB", what, MaxDecompressed>>20)
	}
	return out, nil
}

// ContentResources are the resources a Content holds: gzip of {"resources": [...]}.
func ContentResources(c *fleet.Content) ([]fleet.BundleResource, error) {
	data, err := Gunzip(c.Content, "content "+c.Name)
	if err != nil {
		return nil, err
	}
	return ManifestResources(data, "content "+c.Name)
}

// ManifestResources are the resources of an uncompressed manifest, {"resources": [...]}; what
// names it in errors.
func ManifestResources(data []byte, what string) ([]fleet.BundleResource, error) {
	var manifest struct {
		Resources []fleet.BundleResource `json:"resources"`
	}
	if err := json.Unmarshal(data, &manifest); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return manifest.Resources, nil
}
