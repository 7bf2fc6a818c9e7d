package gitrepo_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("GitRepo credentials", func() {
	It("are read from the manager's cache, not from the apiserver on every reconcile, and a changed Secret is picked up at once", func(ctx context.Context) {
		const secret = "rotating-credentials"
		_, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeBasicAuth,
			StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: "wrong"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		commit := publish("rotating", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		newGitRepo("rotating", "rotating", func(s *fleet.GitRepoSpec) {
			s.ClientSecretName = secret
			s.PollingInterval = &metav1.Duration{Duration: time.Second}
		})
		Eventually(func() string {
			c := fleet.FindCondition(gitRepo("rotating").Status.Conditions, fleet.ConditionGitPolling)
			if c == nil || c.Status != corev1.ConditionFalse {
				return ""
			}
			return c.Message
		}).ShouldNot(BeEmpty(), "the wrong password is refused")

		s, err := kube.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, secret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		s.Data[corev1.BasicAuthPasswordKey] = []byte(gitPassword)
		_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Update(ctx, s, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() map[string]string { return bundlesOf("rotating") }).Should(Equal(map[string]string{"rotating-app": commit}))
		// Polled every second meanwhile, yet the Secret was never fetched one by one.
		Expect(secretGetsOf(fleet.DefaultNamespace, secret)).To(BeZero())
	})
})
