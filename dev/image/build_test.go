package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func testSpec(t *testing.T) spec {
	t.Helper()
	dir := t.TempDir()
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch)
		if err := os.WriteFile(p, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[arch] = p
	}
	certs := filepath.Join(dir, "certs.pem")
	if err := os.WriteFile(certs, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec{Binaries: bins, CACerts: certs, Version: "v1.2.3", Revision: "abc", Source: "https://example.com/fleet",
		Created: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
}

// The same inputs give the same digest; another commit time gives another.
func TestBuildIsReproducible(t *testing.T) {
	s := testSpec(t)
	var digests []string
	for range 2 {
		idx, err := build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds, two digests: %v", digests)
	}
	s.Created = s.Created.Add(time.Second)
	idx, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() == digests[0] {
		t.Fatal("the creation time does not reach the digest")
	}
}

func TestImageConfig(t *testing.T) {
	idx, err := build(testSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 || m.Manifests[0].Platform.Architecture != "amd64" || m.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("manifests %+v", m.Manifests)
	}
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/fleet" ||
			c.Labels["org.opencontainers.image.revision"] != "abc" || c.Labels["org.opencontainers.image.version"] != "v1.2.3" ||
			c.Labels["org.opencontainers.image.source"] != "https://example.com/fleet" || cf.Architecture != desc.Platform.Architecture {
			t.Errorf("%s: config %+v", desc.Platform.Architecture, c)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Fatalf("%d layers, %v", len(layers), err)
		}
	}
}
