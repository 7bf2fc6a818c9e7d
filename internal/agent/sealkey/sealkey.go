// Package sealkey keeps the agent's sealing key: a key pair the agent makes in its own cluster
// the first time it runs, whose private half stays there (a Secret of the agent's namespace) and
// whose public half the agent reports in its Cluster's status.agent.sealingKey, for the manager
// to seal a bundle's secrets to this cluster alone (internal/sealing). (agent)
package sealkey

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/sealing"
)

// SecretName is the Secret of the agent's namespace holding the key pair: "private" and
// "public". Deleting it rotates the key: the agent makes a new one when it next starts, and the
// manager seals this cluster's secrets again to the new public key.
const SecretName = "fleet-agent-sealing-key"

// Ensure reads the agent's key pair, making and storing it when there is none yet (of two agents
// starting at once, the first to store it wins, and both use that one).
func Ensure(ctx context.Context, kube kubernetes.Interface, namespace string) (private, public string, err error) {
	secrets := kube.CoreV1().Secrets(namespace)
	for range 3 {
		s, err := secrets.Get(ctx, SecretName, metav1.GetOptions{})
		switch {
		case err == nil:
			private, public = string(s.Data["private"]), string(s.Data["public"])
			if private == "" || public == "" {
				return "", "", fmt.Errorf("secret %s/%s: no private or public key: delete it for a new key pair", namespace, SecretName)
			}
			return private, public, nil
		case !apierrors.IsNotFound(err):
			return "", "", fmt.Errorf("reading secret %s/%s: %w", namespace, SecretName, err)
		}
		private, public, err = sealing.NewKey()
		if err != nil {
			return "", "", err
		}
		_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: namespace},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"private": []byte(private), "public": []byte(public)}}, metav1.CreateOptions{})
		if err == nil {
			return private, public, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", "", fmt.Errorf("storing secret %s/%s: %w", namespace, SecretName, err)
		}
	}
	return "", "", fmt.Errorf("secret %s/%s: changing while read", namespace, SecretName)
}
