package testenv

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/rancherca"
)

// RancherCA writes ca as Rancher keeps its CA bundle on the manager: Secret name (rancherca.Secret
// or rancherca.SecretExtra) of rancherca.Namespace, under key, deleted when the spec ends.
func RancherCA(ctx context.Context, kube kubernetes.Interface, name, key string, ca []byte) {
	GinkgoHelper()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rancherca.Namespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	_, err = kube.CoreV1().Secrets(rancherca.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string][]byte{key: ca}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) {
		_ = kube.CoreV1().Secrets(rancherca.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
	})
}
