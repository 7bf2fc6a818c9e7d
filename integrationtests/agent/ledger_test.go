package agent_test

import (
	"context"
	"fmt"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// forgeRelease writes, as a downstream user who may create Secrets in namespace storeNS would, a
// Helm release Secret that looks like one of the agent's: the agent's labels, the release
// namespace its payload names, and whatever manifest and hooks the user likes.
func forgeRelease(ctx context.Context, storeNS string, rel *release.Release) {
	if rel.Info == nil {
		rel.Info = &release.Info{Status: release.StatusDeployed}
	}
	if rel.Chart == nil {
		rel.Chart = &chart.Chart{Metadata: &chart.Metadata{Name: "forged", Version: "1.0.0", APIVersion: "v2"}}
	}
	store := driver.NewSecrets(local.CoreV1().Secrets(storeNS))
	Expect(store.Create("sh.helm.release.v1."+rel.Name+".v"+strconv.Itoa(rel.Version), rel)).To(Succeed())
}

func ensureNS(ctx context.Context, name string) {
	_, err := local.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

func namespaceExists(ctx context.Context, name string) func() bool {
	return func() bool {
		ns, err := local.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return err == nil && ns.DeletionTimestamp == nil
	}
}

var _ = Describe("the agent acts only on releases it made", func() {
	It("uninstalls a deleted bundle's own release, and no release Secret a downstream user forged with its labels", func(ctx context.Context) {
		name, tenant, victim := unique("ledger-gc"), unique("tenant"), unique("victim")
		ensureNS(ctx, tenant)
		ensureNS(ctx, victim)
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: unique("ledger-app")},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("app"))}})
		readyAndCurrent(name)
		labels := map[string]string{helmdeployer.BundleIDLabel: name, helmdeployer.AgentNamespaceLabel: agentNS,
			helmdeployer.DeleteNamespaceLabel: "true"}
		// A pre-delete hook that would run with the agent's cluster-admin identity.
		forgeRelease(ctx, tenant, &release.Release{Name: "hooked", Namespace: tenant, Version: 1, Labels: labels,
			Hooks: []*release.Hook{{Name: "pwn", Kind: "ConfigMap", Path: "forged/templates/pwn.yaml",
				Manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pwned\n  namespace: kube-system\n",
				Events:   []release.HookEvent{release.HookPreDelete}}}})
		// A release whose payload names another namespace, to be deleted with it.
		forgeRelease(ctx, tenant, &release.Release{Name: "elsewhere", Namespace: victim, Version: 1, Labels: labels})

		Expect(api.Bundle().Delete(fleet.DefaultNamespace, name, nil)).To(Succeed())
		Eventually(func() []corev1.Secret {
			l, err := local.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
			Expect(err).NotTo(HaveOccurred())
			return l.Items
		}, 3*time.Minute).Should(BeEmpty(), func() string {
			// Which side held it up: the manager (the Bundle or its BundleDeployment still
			// there) or the agent (both gone, the release not).
			_, bErr := api.Bundle().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
			return fmt.Sprintf("the bundle's own release is uninstalled (Bundle: %v; BundleDeployment there: %v)", bErr, bd(name) != nil)
		})
		_, err := local.CoreV1().ConfigMaps("kube-system").Get(ctx, "pwned", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a forged release's hook ran: %v", err)
		Expect(namespaceExists(ctx, victim)()).To(BeTrue(), "a forged release's namespace was deleted")
		forged, err := local.CoreV1().Secrets(tenant).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
		Expect(err).NotTo(HaveOccurred())
		Expect(forged.Items).To(HaveLen(2), "the forged releases are not the agent's to uninstall")
	})

	It("upgrades from the revision it wrote, not from one a downstream user added", func(ctx context.Context) {
		name, app, bystander := unique("ledger-upgrade"), unique("ledger-app"), unique("bystander")
		ensureNS(ctx, bystander)
		_, err := local.CoreV1().ConfigMaps(bystander).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		opts := fleet.BundleDeploymentOptions{DefaultNamespace: app}
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: opts, Resources: []fleet.BundleResource{res("cm.yaml", configMap("app"))}})
		b := readyAndCurrent(name)
		// Revision 2, written by hand: Helm would delete what it lists and the next revision
		// does not.
		forgeRelease(ctx, app, &release.Release{Name: render.ReleaseName(&opts, name), Namespace: app, Version: 2,
			Labels:   map[string]string{helmdeployer.BundleIDLabel: b.Name, helmdeployer.AgentNamespaceLabel: agentNS},
			Manifest: "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: precious\n  namespace: " + bystander + "\n"})
		updateBundle(name, func(b *fleet.Bundle) {
			b.Spec.Resources = []fleet.BundleResource{res("cm.yaml", configMap("app", "a", "2"))}
		})
		Eventually(cmData(app, "app")).Should(HaveKeyWithValue("a", "2"))
		readyAndCurrent(name)
		Expect(cmData(bystander, "precious")()).NotTo(BeNil(), "the upgrade deleted what a forged revision listed")
	})

	It("deletes a release namespace with deleteNamespace only when it created it", func(ctx context.Context) {
		created, existing := unique("ledger-created"), unique("ledger-existing")
		ensureNS(ctx, existing)
		for _, ns := range []string{created, existing} {
			newBundle(ns, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, DeleteNamespace: true},
				Resources: []fleet.BundleResource{res("cm.yaml", configMap("app"))}})
			readyAndCurrent(ns)
		}
		for _, ns := range []string{created, existing} {
			Expect(api.Bundle().Delete(fleet.DefaultNamespace, ns, nil)).To(Succeed())
		}
		// The manager deletes the BundleDeployments, then the agent the releases: after an
		// outage spec the manager's watches may take a while to catch up.
		Eventually(namespaceExists(ctx, created), 3*time.Minute).Should(BeFalse(), "the namespace the agent created goes with the bundle")
		Eventually(cmData(existing, "app"), 3*time.Minute).Should(BeNil())
		Expect(namespaceExists(ctx, existing)()).To(BeTrue(), "a namespace that existed before stays")
	})
})
