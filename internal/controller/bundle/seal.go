package bundle

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// SealSecret, in the manager's namespace, holds the key (data "key") the manager seals the
// revisions a Rollout keeps with. A Rollout's status is written by whoever may write
// rollouts/status in its namespace; the revision a rollback returns to names a Content, which
// the agents of the Bundle's clusters would deploy. A revision whose seal does not verify (not
// recorded by a manager of this installation, for this Bundle) is not deployed: so a forged
// status.passed cannot ship another namespace's Content to a cluster.
const SealSecret = "fleet-rollout-seal"

// SealKey reads the manager's sealing key from namespace ns, making it the first time.
func SealKey(ctx context.Context, kube kubernetes.Interface, ns string) ([]byte, error) {
	for range 3 {
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, SealSecret, metav1.GetOptions{})
		if err == nil && len(s.Data["key"]) >= 32 {
			return s.Data["key"], nil
		}
		if err == nil {
			return nil, fmt.Errorf("secret %s/%s: data key holds fewer than 32 bytes", ns, SealSecret)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading secret %s/%s: %w", ns, SealSecret, err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SealSecret, Namespace: ns},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": key}}, metav1.CreateOptions{})
		if err == nil {
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating secret %s/%s: %w", ns, SealSecret, err)
		}
		// Another manager (a shard) made it first: read theirs.
	}
	return nil, fmt.Errorf("secret %s/%s: made and gone again", ns, SealSecret)
}

// sealer seals and verifies the revisions Rollouts keep.
type sealer []byte

// Seal is r's seal for Bundle b under key, as a Rollout's revisions are sealed: the deployment
// history seals the revisions it records with it.
func Seal(key []byte, b *fleet.Bundle, r *fleet.RolloutRevision) string {
	return sealer(key).seal(b, r)
}

// seal is r's seal for Bundle b: an HMAC of b's UID and what r deploys from, its Content (or
// registry contents) under its revision. Its options and targets are not sealed: they pass the
// namespace's rules again before use (renderPassed), and an apiserver's defaulting may respell
// them on the way.
func (s sealer) seal(b *fleet.Bundle, r *fleet.RolloutRevision) string {
	data, err := json.Marshal([]string{string(b.UID), r.Revision, r.Content, r.ContentsID})
	if err != nil {
		return ""
	}
	m := hmac.New(sha256.New, s)
	m.Write(data)
	return hex.EncodeToString(m.Sum(nil))
}

// verify says why r cannot be deployed for b (nil when it can): its seal is not the one this
// installation's managers give it.
func (s sealer) verify(b *fleet.Bundle, r *fleet.RolloutRevision) error {
	if !s.valid(b, r) {
		return fmt.Errorf("rollout %s/%s: status.passed (revision %s) was not recorded by the fleet manager for this Bundle (its seal does not verify): "+
			"it is not deployed, and the clusters stay where they are", b.Namespace, b.Name, r.Revision)
	}
	return nil
}

// valid says r's seal is the one this installation's managers give it for b.
func (s sealer) valid(b *fleet.Bundle, r *fleet.RolloutRevision) bool {
	want := s.seal(b, r)
	return len(s) > 0 && r.Seal != "" && want != "" && hmac.Equal([]byte(want), []byte(r.Seal))
}
