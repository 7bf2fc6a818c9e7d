// Command image builds the fleet container image: an OCI image index of the one fleet binary for
// linux/amd64 and linux/arm64, from scratch plus CA certificates, a non-root user (65532) and a
// writable /tmp. It needs no container daemon. The same binaries and commit time give the same
// digest. `make image` and `make image-push` run it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		s        spec
		binaries string
		created  string
		out      string
		push     string
		insecure bool
	)
	flag.StringVar(&binaries, "binaries", "", "comma-separated arch=path of linux binaries, e.g. amd64=bin/linux-amd64/fleet,arm64=bin/linux-arm64/fleet")
	flag.StringVar(&s.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates for the image")
	flag.StringVar(&s.Version, "version", "dev", "version label")
	flag.StringVar(&s.Revision, "revision", "unknown", "git commit label")
	flag.StringVar(&s.Source, "source", "https://github.com/fleetgo/fleet", "source repository label")
	flag.StringVar(&created, "created", "1970-01-01T00:00:00Z", "creation time (RFC 3339): the commit's time, for reproducible digests")
	flag.StringVar(&out, "out", "bin/image", "OCI image layout folder to write")
	flag.StringVar(&push, "push", "", "also push the index to this reference (host:port/path/fleet:tag)")
	flag.BoolVar(&insecure, "insecure", false, "push over plain HTTP")
	flag.Parse()

	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return fmt.Errorf("-created: %w", err)
	}
	s.Created = t.UTC()
	s.Binaries = map[string]string{}
	for _, b := range strings.Split(binaries, ",") {
		arch, path, ok := strings.Cut(b, "=")
		if !ok {
			return fmt.Errorf("-binaries %q: want arch=path", b)
		}
		s.Binaries[arch] = path
	}
	idx, err := build(s)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if _, err := layout.Write(out, idx); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Printf("image index %s written to %s\n", digest, out)
	if push != "" {
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		ref, err := name.ParseReference(push, opts...)
		if err != nil {
			return fmt.Errorf("-push %q: %w", push, err)
		}
		// Credentials as `docker login` or `crane auth login` stored them (~/.docker/config.json).
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", push, err)
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
	}
	return nil
}
