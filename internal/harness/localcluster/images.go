package localcluster

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PushSandboxImage builds the sandbox image from the pause program in binDir and pushes it to
// the plain-HTTP registry at host (host:port), where the node's registry.k8s.io mirror finds it.
func PushSandboxImage(host, binDir string) error {
	bin, err := os.ReadFile(filepath.Join(binDir, "pause"))
	if err != nil {
		return fmt.Errorf("sandbox image: %w (build it with `make node`)", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	img, err = mutate.Config(img, v1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"})
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf.OS, cf.Architecture = "linux", "amd64"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	ref, err := name.ParseReference(host+"/"+strings.TrimPrefix(SandboxImage, "registry.k8s.io/"), name.Insecure)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("pushing the sandbox image to %s: %w", ref, err)
	}
	return nil
}

// PushLayout pushes the image index of the OCI layout dir (what `make image` writes to
// bin/image) to ref in a plain-HTTP registry and returns its digest.
func PushLayout(dir, ref string) (string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", fmt.Errorf("image layout %s: %w (build it with `make image`)", dir, err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return "", err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.WriteIndex(r, idx); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := idx.Digest()
	return d.String(), err
}
