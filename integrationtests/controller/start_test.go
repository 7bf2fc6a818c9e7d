package controller_test

import (
	"context"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/controller"
)

// A manager whose start keeps failing must not sit as the leader reconciling nothing: it
// retries, then gives the Lease back and ends with the error, and its health says so.
var _ = Describe("a manager that cannot start", func() {
	It("retries, then releases the leader Lease and ends with the error; /readyz never passes and /healthz fails", func(ctx context.Context) {
		const ns, sa = "crippled-system", "crippled"
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// Leader election works; nothing else does (bootstrap cannot create its namespaces).
		_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}},
			metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		base := cluster.RESTConfig()
		cfg := &rest.Config{Host: base.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: base.CAData}}

		health := freeAddr()
		runCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		done := make(chan error, 1)
		started := time.Now()
		go func() {
			done <- controller.Run(runCtx, cfg, controller.Options{SystemNamespace: ns, LeaderElect: true, Workers: 2,
				HealthAddr: health, StartTimeout: 3 * time.Second})
		}()
		Eventually(func() (string, error) {
			l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "fleet-controller-lock", metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				return "", err
			}
			return *l.Spec.HolderIdentity, nil
		}).ShouldNot(BeEmpty(), "it becomes the leader")
		Consistently(func() int { code, _ := get("http://" + health + "/readyz"); return code }, "2s").ShouldNot(Equal(http.StatusOK))

		var runErr error
		Eventually(done, 2*time.Minute).Should(Receive(&runErr))
		Expect(runErr).To(HaveOccurred())
		Expect(runErr.Error()).To(ContainSubstring("bootstrap"))
		Expect(time.Since(started)).To(BeNumerically(">=", 3*time.Second), "it retried for the start timeout")
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "fleet-controller-lock", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "").To(BeTrue(), "the Lease is given back, not held until it expires")
		}
		code, body := get("http://" + health + "/healthz")
		Expect(code).To(Equal(http.StatusInternalServerError))
		Expect(body).To(ContainSubstring("bootstrap"))
	})
})
