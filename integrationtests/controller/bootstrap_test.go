package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// An earlier build kept the manager's credential in fleet-local: a manager started on such a
// cluster moves it out, pointing the local Cluster at the system namespace's.
var _ = Describe("a manager started where an earlier build kept its credential in fleet-local", func() {
	It("points the local Cluster at the system namespace and deletes the fleet-local copy", func(ctx context.Context) {
		earlier, api, err := testenv.StartWithCRDs(ctx, "earlier")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(earlier.Stop)
		k, err := earlier.Clientset()
		Expect(err).NotTo(HaveOccurred())
		_, err = k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.LocalNamespace}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = k.CoreV1().Secrets(fleet.LocalNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "local-cluster",
			Labels: map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: "local", fleet.ClusterNamespaceLabel: fleet.LocalNamespace}},
			Data: map[string][]byte{"value": []byte("earlier")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: fleet.LocalNamespace},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "local-cluster", KubeConfigSecretNamespace: fleet.LocalNamespace,
				AgentNamespace: "cattle-fleet-local-system"}})
		Expect(err).NotTo(HaveOccurred())

		stop := testenv.RunController(earlier.RESTConfig(), config.Config{}, controller.Options{})
		DeferCleanup(func() { Expect(stop()).To(Succeed()) })
		Eventually(func(g Gomega) {
			c, err := api.Cluster().Get(fleet.LocalNamespace, "local", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Spec.KubeConfigSecretNamespace).To(Equal("cattle-fleet-system"))
			_, err = k.CoreV1().Secrets(fleet.LocalNamespace).Get(ctx, "local-cluster", metav1.GetOptions{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the fleet-local copy is gone: %v", err)
			s, err := k.CoreV1().Secrets("cattle-fleet-system").Get(ctx, "local-cluster", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(s.Data["value"])).NotTo(Equal("earlier"), "the system namespace's holds the running manager's credential")
		}).Should(Succeed())
		// The agent of the local cluster is installed through it.
		Eventually(func() error {
			_, err := k.CoreV1().Secrets("cattle-fleet-local-system").Get(ctx, "fleet-agent-bootstrap", metav1.GetOptions{})
			return err
		}).Should(Succeed())
	})
})

var _ = Describe("the fleet chart's bootstrap values", func() {
	It("give the local Cluster its labels and agent namespace, or no local Cluster at all", func(ctx context.Context) {
		shaped, api, err := testenv.StartWithCRDs(ctx, "shaped")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(shaped.Stop)
		stop := testenv.RunController(shaped.RESTConfig(), config.Config{}, controller.Options{Bootstrap: bootstrap.Options{
			ClusterLabels: map[string]string{"env": "mgmt"}, AgentNamespace: "mgmt-agent"}})
		DeferCleanup(func() { Expect(stop()).To(Succeed()) })
		Eventually(func(g Gomega) {
			c, err := api.Cluster().Get(fleet.LocalNamespace, "local", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Labels).To(HaveKeyWithValue("env", "mgmt"))
			g.Expect(c.Labels).To(HaveKeyWithValue("name", "local"))
			g.Expect(c.Spec.AgentNamespace).To(Equal("mgmt-agent"))
		}).Should(Succeed())

		bare, bareAPI, err := testenv.StartWithCRDs(ctx, "bare")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(bare.Stop)
		stopBare := testenv.RunController(bare.RESTConfig(), config.Config{}, controller.Options{Bootstrap: bootstrap.Options{LocalAgentDisabled: true}})
		DeferCleanup(func() { Expect(stopBare()).To(Succeed()) })
		// The manager is up once it made the default ClusterGroup of fleet-local.
		Eventually(func() error {
			_, err := bareAPI.ClusterGroup().Get(fleet.LocalNamespace, fleet.DefaultClusterGroup, metav1.GetOptions{})
			return err
		}).Should(Succeed())
		_, err = bareAPI.Cluster().Get(fleet.LocalNamespace, "local", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no local Cluster: %v", err)
		k, err := bare.Clientset()
		Expect(err).NotTo(HaveOccurred())
		_, err = k.CoreV1().Secrets("cattle-fleet-system").Get(ctx, "local-cluster", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no credential for it either: %v", err)
	})
})
