package bundle

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ensureContent stores the Bundle's manifest once, as a Content named after its hash, and
// returns the name. Bundles with the same manifest share the Content.
func (h *handler) ensureContent(b *fleet.Bundle) (string, error) {
	if b.Spec.ContentsID != "" {
		return b.Spec.ContentsID, nil // a registry keeps them (oci.go)
	}
	if name, ok := h.mem.contentName(b); ok {
		if _, err := h.contents.Cache().Get(name); err == nil {
			return name, nil
		}
	}
	manifest, err := target.Manifest(b.Spec.Resources)
	if err != nil {
		return "", err
	}
	name := target.ContentName(manifest)
	if _, err := h.contents.Cache().Get(name); err == nil {
		h.mem.contentStored(b, name)
		return name, nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(manifest); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(manifest)
	_, err = h.contents.Create(&fleet.Content{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Content:    buf.Bytes(),
		SHA256Sum:  hex.EncodeToString(sum[:]),
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating content %s for bundle %s/%s: %w", name, b.Namespace, b.Name, err)
	}
	h.mem.contentStored(b, name)
	return name, nil
}
