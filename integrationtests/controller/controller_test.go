package controller_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/cli/plan"
	"github.com/fleetgo/fleet/internal/manifestdiff"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("bootstrap", func() {
	It("creates the system namespaces, the local Cluster and the default ClusterGroup", func(ctx context.Context) {
		for _, ns := range []string{"cattle-fleet-system", "fleet-local", "fleet-default"} {
			Eventually(func() error { _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); return err }).Should(Succeed())
		}
		Eventually(func() error {
			_, err := api.ClusterGroup().Get("fleet-local", "default", metav1.GetOptions{})
			return err
		}).Should(Succeed())
		Eventually(func() string {
			c, err := api.Cluster().Get("fleet-local", "local", metav1.GetOptions{})
			if err != nil {
				return ""
			}
			return c.Status.Display.State
		}).Should(Equal("WaitCheckIn"), "a cluster whose agent never checked in says so")

		// The local cluster's agent is installed through the kubeconfig the controller wrote for
		// its own cluster, into a namespace apart from the manager's. That credential is the
		// manager's own: it is kept in the system namespace, out of reach of fleet-local's GitRepos.
		var secret *corev1.Secret
		Eventually(func() (err error) {
			secret, err = kube.CoreV1().Secrets("cattle-fleet-system").Get(ctx, "local-cluster", metav1.GetOptions{})
			return err
		}).Should(Succeed())
		_, err := kube.CoreV1().Secrets("fleet-local").Get(ctx, "local-cluster", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no manager credential in fleet-local: %v", err)
		kc, err := clientcmd.RESTConfigFromKubeConfig(secret.Data["value"])
		Expect(err).NotTo(HaveOccurred())
		Expect(kc.Host).To(Equal(cluster.RESTConfig().Host))
		Eventually(func() error {
			_, err := kube.CoreV1().Secrets("cattle-fleet-local-system").Get(ctx, "fleet-agent-bootstrap", metav1.GetOptions{})
			return err
		}).Should(Succeed(), "the agent chart was applied through that kubeconfig")
		c, err := api.Cluster().Get("fleet-local", "local", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Spec.AgentNamespace).To(Equal("cattle-fleet-local-system"))
		Expect(c.Spec.ClientID).NotTo(BeEmpty())
	})
})

var _ = Describe("targeting", func() {
	It("creates BundleDeployments for every targeting form, and only there", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "prod-eu", map[string]string{"env": "prod", "region": "eu"})
		newCluster(ns, "prod-us", map[string]string{"env": "prod", "region": "us"})
		newCluster(ns, "dev", map[string]string{"env": "dev", "region": "eu"})
		_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "europe", Namespace: ns, Labels: map[string]string{"geo": "eu"}},
			Spec:       fleet.ClusterGroupSpec{Selector: sel("region", "eu")},
		})
		Expect(err).NotTo(HaveOccurred())

		forms := map[string]fleet.BundleTarget{
			"by-name":           {ClusterName: "dev"},
			"by-selector":       {ClusterSelector: sel("env", "prod")},
			"by-group":          {ClusterGroup: "europe"},
			"by-group-selector": {ClusterGroupSelector: sel("geo", "eu")},
			"group-and-label":   {ClusterGroup: "europe", ClusterSelector: sel("env", "prod")},
		}
		for name, t := range forms {
			newBundle(ns, name, fleet.BundleSpec{Targets: []fleet.BundleTarget{t}})
		}
		newBundle(ns, "restricted", fleet.BundleSpec{
			Targets:            []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}},
			TargetRestrictions: []fleet.BundleTargetRestriction{{ClusterSelector: sel("region", "us")}},
		})
		Eventually(clusterNames(ns, "by-name")).Should(Equal([]string{"dev"}))
		Eventually(clusterNames(ns, "by-selector")).Should(Equal([]string{"prod-eu", "prod-us"}))
		Eventually(clusterNames(ns, "by-group")).Should(Equal([]string{"dev", "prod-eu"}))
		Eventually(clusterNames(ns, "by-group-selector")).Should(Equal([]string{"dev", "prod-eu"}))
		Eventually(clusterNames(ns, "group-and-label")).Should(Equal([]string{"prod-eu"}))
		Eventually(clusterNames(ns, "restricted")).Should(Equal([]string{"prod-us"}))
		Consistently(clusterNames(ns, "by-name"), "1s").Should(Equal([]string{"dev"}))

		bd := deployments(ns, "by-name")["dev"]
		c, _ := api.Cluster().Get(ns, "dev", metav1.GetOptions{})
		Expect(bd.Namespace).To(Equal(c.Status.Namespace))
		Expect(bd.Labels).To(HaveKeyWithValue(fleet.ClusterNamespaceLabel, ns))
		Expect(bd.Spec.DeploymentID).To(HavePrefix("s-"))
		Expect(bd.Spec.DeploymentID).To(Equal(bd.Spec.StagedDeploymentID))

		By("retargeting: a cluster that stops matching loses its BundleDeployment")
		Eventually(func() error {
			c, err := api.Cluster().Get(ns, "prod-us", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Labels["env"] = "staging"
			_, err = api.Cluster().Update(c)
			return err
		}).Should(Succeed())
		Eventually(clusterNames(ns, "by-selector")).Should(Equal([]string{"prod-eu"}))

		By("deleting the Bundle deletes its BundleDeployments")
		Expect(api.Bundle().Delete(ns, "by-group", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(clusterNames(ns, "by-group")).Should(BeEmpty())
		Eventually(func() bool {
			_, err := api.Bundle().Get(ns, "by-group", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())

		By("a BundleDeployment of the deleted Bundle the cache shows only later is deleted too")
		// As when it was created just before the deletion while the manager's watch was behind:
		// the finalizer did not see it.
		late := bd.DeepCopy()
		late.ObjectMeta = metav1.ObjectMeta{Name: "by-group", Namespace: bd.Namespace, Labels: map[string]string{
			fleet.BundleLabel: "by-group", fleet.BundleNamespaceLabel: ns, fleet.ClusterLabel: "dev", fleet.ClusterNamespaceLabel: ns}}
		_, err = api.BundleDeployment().Create(late)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			_, err := api.BundleDeployment().Get(late.Namespace, late.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
	})

	It("merges target customizations and renders values per cluster", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"env": "prod"})
		newCluster(ns, "b", map[string]string{"env": "dev"})
		newBundle(ns, "app", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app", Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]any{"name": "${ .ClusterName }-${ .ClusterLabels.env }", "replicas": float64(1)}},
			}},
			Targets: []fleet.BundleTarget{
				{Name: "prod", ClusterSelector: sel("env", "prod"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
					Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"replicas": float64(3)}}}}},
				{Name: "all", ClusterSelector: &metav1.LabelSelector{}},
			},
		})
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"a", "b"}))
		bds := deployments(ns, "app")
		Eventually(func() map[string]any { return deploymentValues(ctx, deployments(ns, "app")["a"]) }).Should(And(
			HaveKeyWithValue("name", "a-prod"), HaveKeyWithValue("replicas", float64(3))))
		Eventually(func() map[string]any { return deploymentValues(ctx, deployments(ns, "app")["b"]) }).Should(And(
			HaveKeyWithValue("name", "b-dev"), HaveKeyWithValue("replicas", float64(1))))
		Expect(bds["a"].Spec.DeploymentID).NotTo(Equal(bds["b"].Spec.DeploymentID))
		Expect(bds["a"].Labels[fleet.ContentNameLabel]).To(Equal(bds["b"].Labels[fleet.ContentNameLabel]), "one manifest, one Content")
	})
})

var _ = Describe("a Bundle whose Helm values Fleet 0.13+ keeps in a Secret (spec.valuesHash)", func() {
	It("deploys with the values of the Secret, the Bundle's and each target's", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"env": "prod"})
		data := map[string][]byte{"values.yaml": []byte(`{"name":"shop","replicas":1}`), "prod": []byte(`{"replicas":3}`)}
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "moved"},
			Type: "fleet.cattle.io/bundle-values/v1alpha1", Data: data}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// As Fleet's apply leaves it: no values in the Bundle, the hash of the Secret's (the
		// SHA-256 of its data's JSON).
		raw, err := json.Marshal(data)
		Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(raw)
		newBundle(ns, "moved", fleet.BundleSpec{ValuesHash: hex.EncodeToString(sum[:]),
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app", Helm: &fleet.HelmOptions{}},
			Targets:                 []fleet.BundleTarget{{Name: "prod", ClusterSelector: sel("env", "prod")}}})
		Eventually(clusterNames(ns, "moved")).Should(Equal([]string{"a"}))
		values := deploymentValues(ctx, deployments(ns, "moved")["a"])
		Expect(values).To(HaveKeyWithValue("name", "shop"))
		Expect(values).To(HaveKeyWithValue("replicas", float64(3)), "the target's values win")
	})

	It("keeps each BundleDeployment's values in its options Secret, as Fleet's manager does, and follows their changes", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"env": "prod"})
		newCluster(ns, "b", map[string]string{"env": "dev"})
		spec := func(replicas int) fleet.BundleSpec {
			return fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app",
				Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"replicas": replicas}}}},
				Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}, {Name: "dev", ClusterSelector: sel("env", "dev"),
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"debug": true}}}}}}}
		}
		newBundle(ns, "inline", spec(2))
		Eventually(clusterNames(ns, "inline")).Should(Equal([]string{"a", "b"}))
		Eventually(func(g Gomega) {
			bds := deployments(ns, "inline")
			g.Expect(deploymentValues(ctx, bds["a"])).To(Equal(map[string]any{"replicas": float64(2)}))
			g.Expect(deploymentValues(ctx, bds["b"])).To(Equal(map[string]any{"replicas": float64(2), "debug": true}))
		}).Should(Succeed())
		for _, bd := range deployments(ns, "inline") {
			Expect(bd.Spec.Options.Helm.Values).To(BeNil(), "no values in the BundleDeployment of %s", bd.Namespace)
			Expect(bd.Spec.StagedOptions.Helm.Values).To(BeNil())
		}
		b, err := api.Bundle().Get(ns, "inline", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		b.Spec = spec(5)
		_, err = api.Bundle().Update(b)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() map[string]any { return deploymentValues(ctx, deployments(ns, "inline")["a"]) }).Should(Equal(map[string]any{"replicas": float64(5)}))
	})

	It("writes a deleted options Secret again once its agent reports it missing, and only with the values it held", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"env": "prod"})
		newBundle(ns, "lost", fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app",
			Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"replicas": 2}}}},
			Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}}})
		Eventually(clusterNames(ns, "lost")).Should(Equal([]string{"a"}))
		Eventually(func() map[string]any { return deploymentValues(ctx, deployments(ns, "lost")["a"]) }).Should(Equal(map[string]any{"replicas": float64(2)}))
		bd := deployments(ns, "lost")["a"]
		gone := func() bool {
			_, err := kube.CoreV1().Secrets(bd.Namespace).Get(ctx, bd.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
		Expect(kube.CoreV1().Secrets(bd.Namespace).Delete(ctx, bd.Name, metav1.DeleteOptions{})).To(Succeed())
		Consistently(gone, "2s").Should(BeTrue(), "the manager does not watch these Secrets")

		By("its agent reports the Secret missing, as ours does")
		Eventually(func() error {
			cur, err := api.BundleDeployment().Get(bd.Namespace, bd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionDeployed, corev1.ConditionFalse, fleet.ReasonValuesSecretMissing,
				"the Helm values of bundledeployment "+bd.Namespace+"/"+bd.Name+" (spec.valuesHash): the options Secret is missing", time.Now())
			_, err = api.BundleDeployment().UpdateStatus(cur)
			return err
		}).Should(Succeed())
		Eventually(func() map[string]any {
			if gone() {
				return nil
			}
			return deploymentValues(ctx, deployments(ns, "lost")["a"])
		}).Should(Equal(map[string]any{"replicas": float64(2)}))
		Expect(deployments(ns, "lost")["a"].Spec.ValuesHash).To(Equal(bd.Spec.ValuesHash), "the deployment itself is not changed")
	})

	It("keeps a held deployment's values in its options Secret while the new ones are staged", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"env": "prod"})
		spec := func(replicas int, paused bool) fleet.BundleSpec {
			return fleet.BundleSpec{Paused: paused, BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app",
				Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"replicas": replicas}}}},
				Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}}}
		}
		newBundle(ns, "held", spec(2, false))
		Eventually(clusterNames(ns, "held")).Should(Equal([]string{"a"}))
		Eventually(func() map[string]any { return deploymentValues(ctx, deployments(ns, "held")["a"]) }).Should(Equal(map[string]any{"replicas": float64(2)}))
		b, err := api.Bundle().Get(ns, "held", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		b.Spec = spec(5, true)
		_, err = api.Bundle().Update(b)
		Expect(err).NotTo(HaveOccurred())
		// The paused Bundle stages the new values; the cluster keeps deploying the old ones.
		Eventually(func() map[string]any { return optionsSecretValues(ctx, deployments(ns, "held")["a"], "stagedValues") }).Should(Equal(map[string]any{"replicas": float64(5)}))
		bd := deployments(ns, "held")["a"]
		Expect(bd.Spec.DeploymentID).NotTo(Equal(bd.Spec.StagedDeploymentID))
		Expect(deploymentValues(ctx, bd)).To(Equal(map[string]any{"replicas": float64(2)}), "the held options keep their values")
		b, err = api.Bundle().Get(ns, "held", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		b.Spec = spec(5, false)
		_, err = api.Bundle().Update(b)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() map[string]any { return deploymentValues(ctx, deployments(ns, "held")["a"]) }).Should(Equal(map[string]any{"replicas": float64(5)}))
	})
})

// deploymentValues are the Helm values of bd's options Secret, after checking that it is Fleet's
// form: named as bd, in its namespace, of type fleet.cattle.io/bundle-deployment/v1alpha1, owned
// by bd, keys values and stagedValues, spec.valuesHash the SHA-256 of the two one after the other.
func deploymentValues(ctx context.Context, bd *fleet.BundleDeployment) map[string]any {
	GinkgoHelper()
	return optionsSecretValues(ctx, bd, "values")
}

// optionsSecretValues are the Helm values under key (values or stagedValues) of bd's options
// Secret, checked as deploymentValues says.
func optionsSecretValues(ctx context.Context, bd *fleet.BundleDeployment, key string) map[string]any {
	GinkgoHelper()
	Expect(bd).NotTo(BeNil())
	s, err := kube.CoreV1().Secrets(bd.Namespace).Get(ctx, bd.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(string(s.Type)).To(Equal("fleet.cattle.io/bundle-deployment/v1alpha1"))
	Expect(s.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "BundleDeployment"), HaveField("UID", bd.UID))))
	sum := sha256.Sum256(append(append([]byte{}, s.Data["values"]...), s.Data["stagedValues"]...))
	if bd.Spec.ValuesHash != hex.EncodeToString(sum[:]) {
		return nil // written, the BundleDeployment not yet
	}
	values := map[string]any{}
	Expect(json.Unmarshal(s.Data[key], &values)).To(Succeed())
	return values
}

var _ = Describe("BundleNamespaceMapping", func() {
	It("is read by one rule in the manager and fleet plan: the same clusters, and a selector that does not parse reported by both", func(ctx context.Context) {
		bundles, other := newNamespace(ctx), newNamespace(ctx)
		labelNamespace(ctx, other, "team", "b-"+other)
		newCluster(bundles, "near", map[string]string{"env": "prod"})
		newCluster(other, "remote", map[string]string{"env": "prod"})
		mapping := func(name string, nsSel *metav1.LabelSelector) {
			_, err := api.BundleNamespaceMapping().Create(&fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: bundles},
				BundleSelector: sel("app", "x"), NamespaceSelector: nsSel})
			Expect(err).NotTo(HaveOccurred())
		}
		mapping("to-b", sel("team", "b-"+other))
		// A namespaceSelector the apiserver takes but no selector can be made of.
		mapping("broken", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}})
		spec := fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"}},
			Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}}}
		_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: bundles, Labels: map[string]string{"app": "x"}}, Spec: spec})
		Expect(err).NotTo(HaveOccurred())
		planned := func() *plan.Report {
			ti, err := plan.Clusters(ctx, api, kube, bundles)
			Expect(err).NotTo(HaveOccurred())
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: bundles, Labels: map[string]string{"app": "x"}}, Spec: spec}
			r, err := plan.Run(plan.Input{Head: plan.Side{Bundles: []*fleet.Bundle{b}}, Targeting: ti, Redact: manifestdiff.NewRedactor()})
			Expect(err).NotTo(HaveOccurred())
			return r
		}

		const why = "targeting error: bundlenamespacemapping broken: namespaceSelector"
		Eventually(func() string {
			c := fleet.FindCondition(bundleStatus(bundles, "app")().Conditions, fleet.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(ContainSubstring(why), "the manager reports it")
		Expect(clusterNames(bundles, "app")()).To(BeEmpty(), "and targets no cluster short")
		r := planned()
		Expect(r.Errors()).To(Equal(1))
		Expect(r.Bundles).To(ConsistOf(And(HaveField("Name", "app"), HaveField("Error", ContainSubstring(why)))), "fleet plan reports it")

		// Mended, both reach the same clusters: the Bundle's own and the mapped namespace's.
		Expect(api.BundleNamespaceMapping().Delete(bundles, "broken", nil)).To(Succeed())
		Eventually(clusterNames(bundles, "app")).Should(Equal([]string{"near", "remote"}))
		r = planned()
		Expect(r.Errors()).To(BeZero())
		Expect(r.Bundles).To(HaveLen(1))
		var reached []string
		for _, g := range r.Bundles[0].Groups {
			reached = append(reached, g.Clusters...)
		}
		Expect(reached).To(ConsistOf(bundles+"/near", other+"/remote"))
	})

	It("lets Bundles target Clusters of the namespaces it maps", func(ctx context.Context) {
		bundles, other := newNamespace(ctx), newNamespace(ctx)
		labelNamespace(ctx, other, "team", "b-"+other)
		newCluster(other, "remote", map[string]string{"env": "prod"})
		_, err := api.Bundle().Create(&fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: bundles, Labels: map[string]string{"app": "x"}},
			Spec: fleet.BundleSpec{
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\n"}},
				Targets:   []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}},
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Consistently(clusterNames(bundles, "app"), "1s").Should(BeEmpty(), "without a mapping only the bundle's namespace counts")

		_, err = api.BundleNamespaceMapping().Create(&fleet.BundleNamespaceMapping{
			ObjectMeta:        metav1.ObjectMeta{Name: "to-b", Namespace: bundles},
			BundleSelector:    sel("app", "x"),
			NamespaceSelector: sel("team", "b-"+other),
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(clusterNames(bundles, "app")).Should(Equal([]string{"remote"}))
	})

	It("lets no mapped Bundle take the deployment of a Bundle of the same name: the second says why and changes nothing", func(ctx context.Context) {
		tenant, home := newNamespace(ctx), newNamespace(ctx)
		labelNamespace(ctx, home, "team", "home-"+home)
		newCluster(home, "edge", map[string]string{"env": "prod"})
		newBundle(home, "web", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}}})
		Eventually(clusterNames(home, "web")).Should(Equal([]string{"edge"}))
		theirs := deployments(home, "web")["edge"]

		// The tenant's namespace is mapped to the home namespace's clusters, and its Bundle has
		// the same name.
		_, err := api.BundleNamespaceMapping().Create(&fleet.BundleNamespaceMapping{
			ObjectMeta:        metav1.ObjectMeta{Name: "to-home", Namespace: tenant},
			BundleSelector:    &metav1.LabelSelector{},
			NamespaceSelector: sel("team", "home-"+home),
		})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tenant},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: tenant\n"}},
				Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "prod")}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			b, err := api.Bundle().Get(tenant, "web", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady); c != nil {
				return c.Message
			}
			return ""
		}).Should(And(ContainSubstring("cluster edge"), ContainSubstring("is Bundle "+home+"/web's")))
		Consistently(func(g Gomega) {
			bd, err := api.BundleDeployment().Get(theirs.Namespace, "web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bd.Labels).To(HaveKeyWithValue(fleet.BundleNamespaceLabel, home))
			g.Expect(bd.Spec.DeploymentID).To(Equal(theirs.Spec.DeploymentID), "the home Bundle's deployment is unchanged")
		}, "3s").Should(Succeed())
		Expect(deployments(tenant, "web")).To(BeEmpty())
	})
})

var _ = Describe("content", func() {
	It("stores one Content for 100 BundleDeployments and deletes it after the last", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for i := range 100 {
			_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%03d", i), Namespace: ns, Labels: map[string]string{"fleet": "many"}}})
			Expect(err).NotTo(HaveOccurred())
		}
		newBundle(ns, "shared", fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap # " + ns + "\n"}},
			Targets:   []fleet.BundleTarget{{ClusterSelector: sel("fleet", "many")}},
		})
		Eventually(func() int { return len(deployments(ns, "shared")) }).WithTimeout(2 * time.Minute).Should(Equal(100))
		var contentName string
		for _, bd := range deployments(ns, "shared") {
			if contentName == "" {
				contentName = bd.Labels[fleet.ContentNameLabel]
			}
			Expect(bd.Labels[fleet.ContentNameLabel]).To(Equal(contentName))
		}
		Eventually(func() int {
			c, err := api.Content().Get(contentName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return c.Status.ReferenceCount
		}).Should(Equal(100))
		// The manager's cache keeps Contents without their manifest; counting must not write
		// that absence back.
		c, err := api.Content().Get(contentName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Content).NotTo(BeEmpty())
		Expect(c.SHA256Sum).NotTo(BeEmpty())

		Expect(api.Bundle().Delete(ns, "shared", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := api.Content().Get(contentName, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).
			WithTimeout(time.Minute).Should(BeTrue())
	})
})

var _ = Describe("rollout", func() {
	It("stages without promoting while paused", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", nil)
		newBundle(ns, "app", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "a"}}})
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"a"}))
		first := deployments(ns, "app")["a"]
		agentDeploys(first, true)

		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Spec.Paused = true
			b.Spec.DefaultNamespace = "changed"
		})
		Eventually(func() string { return deployments(ns, "app")["a"].Spec.StagedOptions.DefaultNamespace }).Should(Equal("changed"))
		bd := deployments(ns, "app")["a"]
		Expect(bd.Spec.DeploymentID).To(Equal(first.Spec.DeploymentID), "nothing is promoted while paused")
		Eventually(func() int { return bundleStatus(ns, "app")().Summary.OutOfSync }).Should(Equal(1))

		updateBundle(ns, "app", func(b *fleet.Bundle) { b.Spec.Paused = false })
		Eventually(func() string { return deployments(ns, "app")["a"].Spec.Options.DefaultNamespace }).Should(Equal("changed"))
	})

	It("promotes no more than maxUnavailable at a time and resumes as clusters become ready", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for _, n := range []string{"a", "b", "c", "d"} {
			newCluster(ns, n, map[string]string{"all": "yes"})
		}
		newBundle(ns, "app", fleet.BundleSpec{
			RolloutStrategy: &fleet.RolloutStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			Targets:         []fleet.BundleTarget{{ClusterSelector: sel("all", "yes")}},
		})
		Eventually(func() int { return len(deployments(ns, "app")) }).Should(Equal(4))
		// New deployments count as unavailable too: they arrive one by one as earlier ones are ready.
		Eventually(func() int {
			for _, bd := range deployments(ns, "app") {
				if bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID {
					agentDeploys(bd, true)
				}
			}
			return bundleStatus(ns, "app")().Summary.Ready
		}).Should(Equal(4))

		updateBundle(ns, "app", func(b *fleet.Bundle) { b.Spec.DefaultNamespace = "v2" })
		promoted := func() int {
			n := 0
			for _, bd := range deployments(ns, "app") {
				if bd.Spec.Options.DefaultNamespace == "v2" {
					n++
				}
			}
			return n
		}
		Eventually(promoted).Should(Equal(1))
		Consistently(promoted, "1s").Should(Equal(1), "the rollout stops at maxUnavailable")
		for i := 2; i <= 4; i++ {
			for _, bd := range deployments(ns, "app") {
				if bd.Spec.Options.DefaultNamespace == "v2" && bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID {
					agentDeploys(bd, true)
				}
			}
			Eventually(promoted).Should(Equal(i), "the rollout resumes as promoted clusters become ready")
		}
	})
})

var _ = Describe("rollout partitions", func() {
	It("rolls out the canary partition first and the rest once it is ready", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for _, n := range []string{"a", "b", "c"} {
			newCluster(ns, n, map[string]string{"all": "yes"})
		}
		newBundle(ns, "app", fleet.BundleSpec{
			RolloutStrategy: &fleet.RolloutStrategy{Partitions: []fleet.Partition{
				{Name: "canary", ClusterName: "a", MaxUnavailable: ptr.To(intstr.FromInt32(0))},
			}},
			Targets: []fleet.BundleTarget{{ClusterSelector: sel("all", "yes")}},
		})
		Eventually(func() int {
			for _, bd := range deployments(ns, "app") {
				if bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID {
					agentDeploys(bd, true)
				}
			}
			return bundleStatus(ns, "app")().Summary.Ready
		}).Should(Equal(3))
		Eventually(func() []string {
			var names []string
			for _, p := range bundleStatus(ns, "app")().PartitionStatus {
				names = append(names, fmt.Sprintf("%s:%d", p.Name, p.Count))
			}
			return names
		}).Should(Equal([]string{"canary:1", "unpartitioned:2"}))

		updateBundle(ns, "app", func(b *fleet.Bundle) { b.Spec.DefaultNamespace = "v2" })
		onV2 := func() []string {
			var names []string
			for c, bd := range deployments(ns, "app") {
				if bd.Spec.Options.DefaultNamespace == "v2" {
					names = append(names, c)
				}
			}
			sort.Strings(names)
			return names
		}
		Eventually(onV2).Should(Equal([]string{"a"}))
		Consistently(onV2, "1s").Should(Equal([]string{"a"}), "the rest waits for the canary")
		Eventually(func(g Gomega) {
			ev, err := testenv.Events(ctx, kube, ns, "Bundle", "app")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["RolloutPaused"]).To(ContainElement(ContainSubstring("partition canary")))
		}).Should(Succeed())
		agentDeploys(deployments(ns, "app")["a"], true)
		Eventually(onV2).Should(Equal([]string{"a", "b", "c"}))
	})
})

var _ = Describe("status", func() {
	It("rolls BundleDeployment states up into the Bundle and the Cluster", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"x": "1"})
		newCluster(ns, "b", map[string]string{"x": "1"})
		// Longer than three check-in intervals: the agents go on checking in, or Offline they are.
		keepCheckingIn(ns, "a", "b")
		newBundle(ns, "app", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: sel("x", "1")}}})
		Eventually(clusterNames(ns, "app")).Should(HaveLen(2))
		Eventually(func() string { return bundleStatus(ns, "app")().Display.ReadyClusters }).Should(Equal("0/2"))
		Eventually(func(g Gomega) {
			ev, err := testenv.Events(ctx, kube, ns, "Bundle", "app")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["TargetsChanged"]).To(ContainElement("targets 2 clusters (was 0)"))
		}).Should(Succeed())

		bds := deployments(ns, "app")
		agentDeploys(bds["a"], true)
		agentDeploys(bds["b"], false)
		Eventually(func() string { return bundleStatus(ns, "app")().Display.State }).Should(Equal("NotReady"))
		st := bundleStatus(ns, "app")()
		Expect(st.Display.ReadyClusters).To(Equal("1/2"))
		ready := fleet.FindCondition(st.Conditions, fleet.ConditionReady)
		Expect(ready.Status).To(Equal(corev1.ConditionFalse))
		Expect(ready.Message).To(ContainSubstring(ns + "/b: NotReady"))
		Eventually(func() string {
			c, _ := api.Cluster().Get(ns, "a", metav1.GetOptions{})
			return c.Status.Display.ReadyBundles
		}).Should(Equal("1/1"))

		_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "both", Namespace: ns},
			Spec: fleet.ClusterGroupSpec{Selector: sel("x", "1")}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() fleet.ClusterGroupDisplay {
			g, _ := api.ClusterGroup().Get(ns, "both", metav1.GetOptions{})
			return g.Status.Display
		}).Should(Equal(fleet.ClusterGroupDisplay{ReadyClusters: "1/2", ReadyBundles: "1/2", State: "NotReady"}))

		agentDeploys(bds["b"], true)
		Eventually(func() corev1.ConditionStatus {
			return fleet.FindCondition(bundleStatus(ns, "app")().Conditions, fleet.ConditionReady).Status
		}).Should(Equal(corev1.ConditionTrue))
		Eventually(func() fleet.ClusterGroupDisplay {
			g, _ := api.ClusterGroup().Get(ns, "both", metav1.GetOptions{})
			return g.Status.Display
		}).Should(Equal(fleet.ClusterGroupDisplay{ReadyClusters: "2/2", ReadyBundles: "2/2"}))
	})

	It("shows a cluster whose agent stopped checking in as Offline, not Ready", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "quiet", nil)
		newBundle(ns, "app", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "quiet"}}})
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"quiet"}))
		agentDeploys(deployments(ns, "app")["quiet"], true)
		Eventually(func() string { return bundleStatus(ns, "app")().Display.ReadyClusters }).Should(Equal("1/1"))
		Eventually(func() string {
			c, _ := api.Cluster().Get(ns, "quiet", metav1.GetOptions{})
			return c.Status.Display.State
		}).Should(Equal("Offline"), "the check-in interval is 2s in this suite")
		c, _ := api.Cluster().Get(ns, "quiet", metav1.GetOptions{})
		cond := fleet.FindCondition(c.Status.Conditions, fleet.ConditionReady)
		Expect(cond.Status).To(Equal(corev1.ConditionUnknown))
		Expect(cond.Message).To(ContainSubstring("has not checked in since"))

		By("its BundleDeployments no longer count as Ready in the Bundle")
		Eventually(func() string { return bundleStatus(ns, "app")().Display.State }).Should(Equal("Offline"))
		st := bundleStatus(ns, "app")()
		Expect(st.Display.ReadyClusters).To(Equal("0/1"))
		Expect(fleet.FindCondition(st.Conditions, fleet.ConditionReady).Status).To(Equal(corev1.ConditionUnknown))

		checkIn(ns, "quiet")
		Eventually(func() string {
			c, _ := api.Cluster().Get(ns, "quiet", metav1.GetOptions{})
			return c.Status.Display.State
		}).Should(BeEmpty())
		Eventually(func() string { return bundleStatus(ns, "app")().Display.ReadyClusters }).Should(Equal("1/1"))
		Eventually(func(g Gomega) {
			ev, err := testenv.Events(ctx, kube, ns, "Cluster", "quiet")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["Offline"]).To(ContainElement(ContainSubstring("has not checked in since")))
			g.Expect(ev).To(HaveKey("BackOnline"))
		}).Should(Succeed())
	})
})

var _ = Describe("a cluster that checks in", func() {
	It("is never counted Offline by a Bundle pass, however long the Bundle's plan is reused", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "busy", nil)
		keepCheckingIn(ns, "busy")
		newBundle(ns, "app", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "busy"}}})
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"busy"}))
		agentDeploys(deployments(ns, "app")["busy"], true)
		Eventually(func() string { return bundleStatus(ns, "app")().Display.ReadyClusters }).Should(Equal("1/1"))

		By("passes for 12s (twice the Offline threshold) with nothing targeting reads changing")
		i := 0
		Consistently(func(g Gomega) {
			i++
			g.Expect(testenv.UpdateBundle(api, ns, "app", func(b *fleet.Bundle) {
				if b.Annotations == nil {
					b.Annotations = map[string]string{}
				}
				b.Annotations["touched"] = strconv.Itoa(i)
			})).To(Succeed())
			st := bundleStatus(ns, "app")()
			g.Expect(st.Display.State).NotTo(Equal("Offline"))
			g.Expect(fleet.FindCondition(st.Conditions, fleet.ConditionReady).Message).NotTo(ContainSubstring("Offline"))
		}, "12s", "500ms").Should(Succeed())
		Eventually(func() string { return bundleStatus(ns, "app")().Display.ReadyClusters }).Should(Equal("1/1"))
	})
})

var _ = Describe("bad input", func() {
	It("reports a templating error on the Bundle and keeps other Bundles working", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", nil)
		newBundle(ns, "broken", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]any{"x": "${ .ClusterLabels.nope.deeper }"}}}},
			Targets: []fleet.BundleTarget{{ClusterName: "a"}},
		})
		newBundle(ns, "fine", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "a"}}})
		Eventually(func() string {
			c := fleet.FindCondition(bundleStatus(ns, "broken")().Conditions, fleet.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(And(HavePrefix("targeting error: cluster a"), ContainSubstring("helm.values")), "in Fleet's words, as a selector error")
		Eventually(clusterNames(ns, "fine")).Should(Equal([]string{"a"}))
		Expect(deployments(ns, "broken")).To(BeEmpty())

		// An invalid selector written past validation (for example by an older client) is
		// reported the same way.
		newBundle(ns, "bad-selector", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn}}}}}})
		Eventually(func() string {
			c := fleet.FindCondition(bundleStatus(ns, "bad-selector")().Conditions, fleet.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(ContainSubstring("targets[0].clusterSelector"))
	})
})
