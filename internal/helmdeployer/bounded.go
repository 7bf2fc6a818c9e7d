package helmdeployer

import (
	"context"
	"encoding/base64"
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fleetgo/fleet/internal/bundlereader"
)

// boundedSecrets is the Secrets client Helm's release storage reads through: a release Secret
// whose record expands past bundlereader.MaxDecompressed is not handed to Helm, which would
// decompress it whole. Anyone who may create Secrets in a release namespace can write one with
// the labels Helm looks for, and a few hundred KiB of gzip can expand to gigabytes in the agent.
type boundedSecrets struct {
	typedcorev1.SecretInterface
}

func (b boundedSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	s, err := b.SecretInterface.Get(ctx, name, opts)
	if err != nil {
		return s, err
	}
	if err := checkRecord(s); err != nil {
		return nil, err
	}
	return s, nil
}

func (b boundedSecrets) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	l, err := b.SecretInterface.List(ctx, opts)
	if err != nil {
		return l, err
	}
	kept := l.Items[:0]
	for i := range l.Items {
		if err := checkRecord(&l.Items[i]); err != nil {
			logrus.WithError(err).Warn("release record left out")
			continue
		}
		kept = append(kept, l.Items[i])
	}
	l.Items = kept
	return l, nil
}

// checkRecord refuses a release Secret whose record (base64 of gzip, as Helm writes it) expands
// too far.
func checkRecord(s *corev1.Secret) error {
	data, ok := s.Data["release"]
	if !ok {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil || len(raw) < 3 || raw[0] != 0x1f || raw[1] != 0x8b {
		return nil // not compressed: Helm reads it as it is, no bigger than the Secret
	}
	if _, err := bundlereader.Gunzip(raw, fmt.Sprintf("release record %s/%s", s.Namespace, s.Name)); err != nil {
		return err
	}
	return nil
}
