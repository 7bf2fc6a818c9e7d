// Package rancherca reads the CA bundle Rancher keeps for servers signed by a private CA: what
// a GitRepo or HelmOp that names no CA of its own trusts besides the system's roots, as on
// Fleet. (manager)
package rancherca

import (
	"bytes"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Where Rancher keeps its CA bundle: Secret tls-ca (key cacerts.pem, the CA of Rancher's own
// certificate) and Secret tls-ca-additional (key ca-additional.pem, further CAs) in its
// namespace.
const (
	Namespace   = "cattle-system"
	Secret      = "tls-ca"
	Key         = "cacerts.pem"
	SecretExtra = "tls-ca-additional"
	KeyExtra    = "ca-additional.pem"
)

// Bundle is Rancher's CA bundle (PEM) read with get: both Secrets' keys, joined; nil when
// neither exists.
func Bundle(get func(namespace, name string) (*corev1.Secret, error)) ([]byte, error) {
	var out [][]byte
	for _, s := range []struct{ name, key string }{{Secret, Key}, {SecretExtra, KeyExtra}} {
		sec, err := get(Namespace, s.name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading Rancher's CA bundle, secret %s/%s: %w", Namespace, s.name, err)
		}
		if pem := bytes.TrimSpace(sec.Data[s.key]); len(pem) > 0 {
			out = append(out, pem)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return append(bytes.Join(out, []byte("\n")), '\n'), nil
}
