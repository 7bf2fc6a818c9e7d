package agent_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// limitedServiceAccount makes a ServiceAccount of the agent's namespace that may write
// ConfigMaps and Secrets (a release's objects and its Helm records) in namespace ns, and nothing
// else: what a downstream administrator gives a tenant's bundles.
func limitedServiceAccount(ctx context.Context, name, ns string) {
	_, err := local.CoreV1().ServiceAccounts(agentNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = local.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = local.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: agentNS, Name: name}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("a bundle with a serviceAccount", func() {
	It("takes every downstream step as that ServiceAccount: no valuesFrom Secret, namespace label or namespace it may not touch", func(ctx context.Context) {
		sa, app, elsewhere := unique("limited"), unique("limited-app"), unique("elsewhere")
		ensureNS(ctx, app)
		ensureNS(ctx, elsewhere)
		limitedServiceAccount(ctx, sa, app)
		_, err := local.CoreV1().Secrets(elsewhere).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-theirs"},
			Data: map[string][]byte{"values.yaml": []byte("stolen: hunter2\n")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		errApplied := func(name string, want ...string) {
			Eventually(func(g Gomega) {
				b := bd(name)
				g.Expect(b).NotTo(BeNil())
				g.Expect(b.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
				for _, w := range want {
					g.Expect(b.Status.Display.Deployed).To(ContainSubstring(w))
				}
			}).Should(Succeed(), name)
		}

		// It deploys into the namespace it may write.
		ok := unique("limited-ok")
		newBundle(ok, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: app, ServiceAccount: sa},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap(ok))}})
		readyAndCurrent(ok)

		// Another namespace's Secret, through valuesFrom.
		values := unique("limited-values")
		newBundle(values, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: app, ServiceAccount: sa,
			Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{{SecretKeyRef: &fleet.SecretKeySelector{
				Name: "not-theirs", Namespace: elsewhere}}}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap(values))}})
		errApplied(values, "helm.valuesFrom[0].secretKeyRef", "forbidden")
		Expect(cmData(app, values)()).To(BeNil(), "nothing was deployed")

		// Pod Security switched off through namespaceLabels.
		labels := unique("limited-labels")
		newBundle(labels, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: app, ServiceAccount: sa,
			NamespaceLabels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap(labels))}})
		errApplied(labels, "forbidden")
		n, err := local.CoreV1().Namespaces().Get(ctx, app, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(n.Labels).NotTo(HaveKey("pod-security.kubernetes.io/enforce"))

		// A namespace of its own making.
		fresh := unique("limited-fresh")
		newBundle(fresh, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: fresh, ServiceAccount: sa},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap(fresh))}})
		errApplied(fresh, "forbidden")
		Expect(namespaceExists(ctx, fresh)()).To(BeFalse(), "no namespace was created")
	})
})

// refusedCopy waits for the manager's SecretRefused Event on the Bundle, saying why, and for the
// Bundle's deployment to name the Secret (its first downstreamResources entry) it waits for.
func refusedCopy(ctx context.Context, mgr kubernetes.Interface, bundle, secret, why string) {
	GinkgoHelper()
	Eventually(func() []string {
		ev, _ := testenv.Events(ctx, mgr, fleet.DefaultNamespace, "Bundle", bundle)
		return ev["SecretRefused"]
	}).Should(ContainElement(ContainSubstring(why)))
	Eventually(func(g Gomega) {
		b := bd(bundle)
		g.Expect(b).NotTo(BeNil())
		g.Expect(b.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("downstreamResources[0]: Secret "+secret))))
	}).Should(Succeed())
}

var _ = Describe("Secrets a Bundle names", func() {
	It("copies no cluster's kubeconfig or manager credential downstream through downstreamResources", func(ctx context.Context) {
		mgr, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, imported, name := unique("edge-kubeconfig"), unique("edge"), unique("exfil")
		// A cluster imported by kubeconfig, as Rancher keeps them beside the GitRepos of fleet-default.
		_, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubeconfig},
			Data: map[string][]byte{"value": []byte("cluster-admin of " + imported)}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: imported, Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterSpec{KubeConfigSecret: kubeconfig}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = api.Cluster().Delete(fleet.DefaultNamespace, imported, nil) })
		// The manager has seen the Cluster (it gave it a namespace), so the refusal names it.
		Eventually(func() string {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, imported, metav1.GetOptions{})
			if err != nil {
				return ""
			}
			return c.Status.Namespace
		}).ShouldNot(BeEmpty())

		ns := unique("exfil-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, DownstreamResources: []fleet.DownstreamResource{
				{Kind: "Secret", Name: kubeconfig}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("app", "k", "v"))},
		})
		refusedCopy(ctx, mgr, name, kubeconfig, "it is the kubeConfigSecret of a Cluster")
		copies, err := mgr.CoreV1().Secrets(clusterNS).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, s := range copies.Items {
			Expect(string(s.Data["value"])).NotTo(ContainSubstring("cluster-admin of"), "copied into the cluster namespace as %s", s.Name)
		}
		_, err = local.CoreV1().Secrets(ns).Get(ctx, kubeconfig, metav1.GetOptions{})
		Expect(err).To(HaveOccurred(), "nothing reached the downstream cluster")

		// A Secret the namespace's owner allowed for downstreamResources, copied, and then named
		// by an administrator as the kubeconfig of a cluster being imported: the copy goes.
		later, laterBundle := unique("later-kubeconfig"), unique("exfil-later")
		_, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: later,
			Annotations: map[string]string{"fleet.cattle.io/allowed-uses": "downstreamResources"}},
			Data: map[string][]byte{"value": []byte("app settings")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newBundle(laterBundle, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, DownstreamResources: []fleet.DownstreamResource{
				{Kind: "Secret", Name: later}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("later", "k", "v"))},
		})
		copied := func() error {
			_, err := mgr.CoreV1().Secrets(clusterNS).Get(ctx, names.DownstreamCopy(laterBundle, later), metav1.GetOptions{})
			return err
		}
		Eventually(copied).Should(Succeed())
		importedLater := unique("edge-later")
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: importedLater, Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterSpec{KubeConfigSecret: later}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = api.Cluster().Delete(fleet.DefaultNamespace, importedLater, nil) })
		Eventually(copied).Should(WithTransform(apierrors.IsNotFound, BeTrue()), "the copy in the cluster namespace goes")
		refusedCopy(ctx, mgr, laterBundle, later, "it is the kubeConfigSecret of a Cluster")
	})
})

var _ = Describe("Secrets a Bundle copies downstream", func() {
	It("copies a Secret or ConfigMap only where a rule allows it: annotated for downstreamResources, or readable by the bundle's service account on the manager", func(ctx context.Context) {
		mgr, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		secret, name, ns := unique("team-b-db"), unique("borrow"), unique("borrow-ns")
		// Another team's Secret of the namespace: a tenant who may write Bundles but not read
		// it names it.
		_, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
			Data: map[string][]byte{"password": []byte("team-b")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		copied := func(bundle string) func() bool {
			return func() bool {
				c, err := mgr.CoreV1().Secrets(clusterNS).Get(ctx, names.DownstreamCopy(bundle, secret), metav1.GetOptions{})
				return err == nil && string(c.Data["password"]) == "team-b"
			}
		}
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, DownstreamResources: []fleet.DownstreamResource{
				{Kind: "Secret", Name: secret}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("app", "k", "v"))},
		})
		refusedCopy(ctx, mgr, name, secret, "is not annotated fleet.cattle.io/allowed-uses=downstreamResources")
		Expect(copied(name)()).To(BeFalse(), "not copied into the cluster namespace")
		Expect(cmData(ns, "app")()).To(BeNil(), "nothing deployed")

		// The namespace's owner allows the use: copied, and the bundle deploys.
		src, err := mgr.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, secret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		src.Annotations = map[string]string{"fleet.cattle.io/allowed-uses": "downstreamResources"}
		src, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Update(ctx, src, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(copied(name)).Should(BeTrue())
		readyAndCurrent(name)
		// And takes it back: the copy goes.
		src.Annotations = nil
		_, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Update(ctx, src, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(copied(name)).Should(BeFalse())

		// A bundle whose service account may get the Secret on the manager copies it; one whose
		// service account may not, does not.
		reader, nobody := unique("reader"), unique("nobody")
		for _, sa := range []string{reader, nobody} {
			_, err = mgr.CoreV1().ServiceAccounts(fleet.DefaultNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = mgr.RbacV1().Roles(fleet.DefaultNamespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: reader},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = mgr.RbacV1().RoleBindings(fleet.DefaultNamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: reader},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: reader, Namespace: fleet.DefaultNamespace}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		withReader, withNobody := unique("borrow-sa"), unique("borrow-nobody")
		for bundle, sa := range map[string]string{withReader: reader, withNobody: nobody} {
			newBundle(bundle, fleet.BundleSpec{
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, ServiceAccount: sa,
					DownstreamResources: []fleet.DownstreamResource{{Kind: "Secret", Name: secret}}},
				Resources: []fleet.BundleResource{res("cm.yaml", configMap("app-"+sa, "k", "v"))},
			})
		}
		Eventually(copied(withReader)).Should(BeTrue())
		Eventually(func() []string {
			ev, _ := testenv.Events(ctx, mgr, fleet.DefaultNamespace, "Bundle", withNobody)
			return ev["SecretRefused"]
		}).Should(ContainElement(ContainSubstring("service account " + fleet.DefaultNamespace + "/" + nobody + " may not get it")))
		Expect(copied(withNobody)()).To(BeFalse())

		// A ConfigMap by the same rules.
		cm, cmBundle := unique("team-b-settings"), unique("borrow-cm")
		_, err = mgr.CoreV1().ConfigMaps(fleet.DefaultNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm},
			Data: map[string]string{"endpoint": "team-b.internal"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		cmCopied := func() bool {
			c, err := mgr.CoreV1().ConfigMaps(clusterNS).Get(ctx, names.DownstreamCopy(cmBundle, cm), metav1.GetOptions{})
			return err == nil && c.Data["endpoint"] == "team-b.internal"
		}
		newBundle(cmBundle, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
				DownstreamResources: []fleet.DownstreamResource{{Kind: "ConfigMap", Name: cm}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("app-cm", "k", "v"))},
		})
		Eventually(func() []string {
			ev, _ := testenv.Events(ctx, mgr, fleet.DefaultNamespace, "Bundle", cmBundle)
			return ev["ConfigMapRefused"]
		}).Should(ContainElement(And(ContainSubstring("configmap "+fleet.DefaultNamespace+"/"+cm+" cannot be used"),
			ContainSubstring("is not annotated fleet.cattle.io/allowed-uses=downstreamResources"))))
		Expect(cmCopied()).To(BeFalse(), "not copied into the cluster namespace")
		srcCM, err := mgr.CoreV1().ConfigMaps(fleet.DefaultNamespace).Get(ctx, cm, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		srcCM.Annotations = map[string]string{"fleet.cattle.io/allowed-uses": "downstreamResources"}
		_, err = mgr.CoreV1().ConfigMaps(fleet.DefaultNamespace).Update(ctx, srcCM, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(cmCopied, 2*time.Minute).Should(BeTrue(), "ConfigMaps are read again every 30s")
		readyAndCurrent(cmBundle)
	})
})

var _ = Describe("a BundleDeployment whose Helm values Fleet 0.13+ keeps in a Secret (spec.valuesHash)", func() {
	It("is deployed with the values of its options Secret", func(ctx context.Context) {
		mgr, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		name, ns := unique("fleet-values"), unique("fleet-values-ns")
		content := fromChart(name, "moved")
		// As Fleet's manager writes them: no values in the BundleDeployment, its options Secret.
		values := []byte(`{"from":"secret"}`)
		_, err = mgr.CoreV1().Secrets(clusterNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Type: "fleet.cattle.io/bundle-deployment/v1alpha1",
			Data: map[string][]byte{"values": values, "stagedValues": values}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		valuesDeployment(name, ns, content, values)
		Eventually(cmData(ns, "moved"), 60*time.Second).Should(HaveKeyWithValue("from", "secret"))
	})

	It("reports its options Secret missing, typed, and deploys once it is there", func(ctx context.Context) {
		mgr, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		name, ns := unique("fleet-lost"), unique("fleet-lost-ns")
		content := fromChart(name, "lost")
		values := []byte(`{"from":"secret"}`)
		valuesDeployment(name, ns, content, values)
		Eventually(func() string {
			bd, err := api.BundleDeployment().Get(clusterNS, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			if c := fleet.FindCondition(bd.Status.Conditions, fleet.ConditionDeployed); c != nil {
				return string(c.Status) + " " + c.Reason + ": " + c.Message
			}
			return ""
		}, 60*time.Second).Should(And(HavePrefix("False "+fleet.ReasonValuesSecretMissing+": "), ContainSubstring(name)))

		By("the Secret written (as the manager writes it again), the agent deploys with its values")
		_, err = mgr.CoreV1().Secrets(clusterNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Type: "fleet.cattle.io/bundle-deployment/v1alpha1",
			Data: map[string][]byte{"values": values, "stagedValues": values}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(cmData(ns, "lost"), 3*time.Minute).Should(HaveKeyWithValue("from", "secret"))
	})
})

// fromChart creates the Content "s-"+name of a chart whose ConfigMap cm says the value "from",
// and returns its name.
func fromChart(name, cm string) string {
	GinkgoHelper()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	Expect(json.NewEncoder(zw).Encode(map[string]any{"resources": []fleet.BundleResource{
		res("Chart.yaml", "apiVersion: v2\nname: "+cm+"\nversion: 1.0.0\n"),
		res("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "+cm+"\ndata:\n  from: {{ .Values.from | quote }}\n")}})).To(Succeed())
	Expect(zw.Close()).To(Succeed())
	content := "s-" + name
	_, err := api.Content().Create(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: content}, Content: gz.Bytes()})
	Expect(err).NotTo(HaveOccurred())
	return content
}

// valuesDeployment creates the BundleDeployment name of content into namespace ns, its values
// (values and staged values alike) kept in its options Secret, as Fleet's manager writes it.
func valuesDeployment(name, ns, content string, values []byte) {
	GinkgoHelper()
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{}}
	_, err := api.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: clusterNS,
		Labels: map[string]string{fleet.ContentNameLabel: content}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: content + ":1", StagedDeploymentID: content + ":1", ValuesHash: valuesHashOf(values, values),
			Options: opts, StagedOptions: opts}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = api.BundleDeployment().Delete(clusterNS, name, nil) })
}

// valuesHashOf is a BundleDeployment's valuesHash as Fleet's manager computes it: the hex SHA-256
// of its values' JSON followed by its staged values'.
func valuesHashOf(values, staged []byte) string {
	sum := sha256.Sum256(append(append([]byte{}, values...), staged...))
	return hex.EncodeToString(sum[:])
}
