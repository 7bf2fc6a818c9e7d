package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, with a home, as distroless images name it.
const (
	uid      = 65532
	userName = "nonroot"
	binPath  = "usr/local/bin/fleet"
)

// spec is one image index: a binary per platform and what labels it.
type spec struct {
	// Binaries maps an architecture (amd64, arm64) to the linux binary built for it.
	Binaries map[string]string
	// CACerts is the PEM bundle installed as /etc/ssl/certs/ca-certificates.crt.
	CACerts string
	// Version, Revision and Source label the image (org.opencontainers.image.*).
	Version, Revision, Source string
	// Created is the image's creation time and every file's modification time: the commit's
	// time, so the same commit gives the same digest.
	Created time.Time
}

// build assembles the image index: per architecture, a base layer (users, CA certificates, a
// writable /tmp) and a layer with the binary, which is the entrypoint.
func build(s spec) (v1.ImageIndex, error) {
	certs, err := os.ReadFile(s.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	base, err := layer(baseFiles(certs), s.Created)
	if err != nil {
		return nil, err
	}
	archs := make([]string, 0, len(s.Binaries))
	for a := range s.Binaries {
		archs = append(archs, a)
	}
	sort.Strings(archs)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range archs {
		bin, err := os.ReadFile(s.Binaries[arch])
		if err != nil {
			return nil, fmt.Errorf("binary for %s: %w", arch, err)
		}
		binLayer, err := layer([]file{{name: binPath, mode: 0o755, data: bin}}, s.Created)
		if err != nil {
			return nil, err
		}
		img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, binLayer)
		if err != nil {
			return nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.Architecture, cf.OS = arch, "linux"
		cf.Created = v1.Time{Time: s.Created}
		cf.Config.Entrypoint = []string{"/" + binPath}
		cf.Config.User = fmt.Sprintf("%d:%d", uid, uid)
		cf.Config.WorkingDir = "/home/" + userName
		cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/" + userName, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
		cf.Config.Labels = map[string]string{
			"org.opencontainers.image.source":   s.Source,
			"org.opencontainers.image.revision": s.Revision,
			"org.opencontainers.image.version":  s.Version,
			"org.opencontainers.image.created":  s.Created.UTC().Format(time.RFC3339),
			"org.opencontainers.image.title":    "fleet",
		}
		img, err = mutate.ConfigFile(img, cf)
		if err != nil {
			return nil, err
		}
		img, err = mutate.CreatedAt(img, v1.Time{Time: s.Created})
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, nil
}

// file is one entry of a layer: a regular file, or a directory when dir is set.
type file struct {
	name     string
	mode     int64
	data     []byte
	dir      bool
	uid, gid int
}

func baseFiles(certs []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", userName, uid, uid, userName, userName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/" + userName, mode: 0o700, dir: true, uid: uid, gid: uid},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: "usr", mode: 0o755, dir: true},
		{name: "usr/local", mode: 0o755, dir: true},
		{name: "usr/local/bin", mode: 0o755, dir: true},
	}
}

// layer writes files into a gzipped tar layer with fixed times and owners, so equal inputs
// give equal digests.
func layer(files []file, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: mtime, Uid: f.uid, Gid: f.gid, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !f.dir {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
