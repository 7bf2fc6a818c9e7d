package controller_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

// agentGates writes what an agent reports once it has deployed the current deploymentID and
// checked the gate "web": ready, and the gate passed or failed.
func agentGates(bd *fleet.BundleDeployment, pass bool) {
	Eventually(func() error {
		cur, err := api.BundleDeployment().Get(bd.Namespace, bd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := time.Now()
		cur.Status.AppliedDeploymentID = cur.Spec.DeploymentID
		cur.Status.Ready, cur.Status.NonModified = true, true
		fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", now)
		fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "", now)
		gate, msg := corev1.ConditionTrue, "GET http://web/: status 200"
		if !pass {
			gate, msg = corev1.ConditionFalse, "GET http://web/: status 500"
		}
		fleet.SetCondition(&cur.Status.Conditions, fleet.GateCondition("web"), gate, "", msg, now)
		_, err = api.BundleDeployment().UpdateStatus(cur)
		return err
	}).Should(Succeed())
}

// onValue lists the clusters whose deployment has the defaultNamespace value.
func onValue(ns, value string) func() []string {
	return func() []string {
		var out []string
		for c, bd := range deployments(ns, "app") {
			if bd.Spec.Options.DefaultNamespace == value {
				out = append(out, c)
			}
		}
		sort.Strings(out)
		return out
	}
}

func rolloutOf(ns string) func() fleet.RolloutStatus {
	return func() fleet.RolloutStatus {
		r, err := api.Rollout().Get(ns, "app", metav1.GetOptions{})
		if err != nil {
			return fleet.RolloutStatus{}
		}
		return r.Status
	}
}

var _ = Describe("a Bundle rolling out by a RolloutPolicy", func() {
	It("goes stage by stage after each soak, waits for approval, and rolls a failing canary back", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for _, n := range []string{"a", "b", "c"} {
			newCluster(ns, n, map[string]string{"all": "yes"})
		}
		keepCheckingIn(ns, "a", "b", "c")
		soak := &metav1.Duration{Duration: 2 * time.Second}
		_, err := api.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "careful", Namespace: ns},
			Spec: fleet.RolloutPolicySpec{
				Stages: []fleet.RolloutStage{{Name: "canary", ClusterName: "a", Soak: soak},
					{Name: "second", ClusterName: "b", Soak: soak}, {Name: "rest", RequireApproval: true}},
				Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web/"}}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
			Annotations: map[string]string{fleet.RolloutPolicyAnnotation: "careful"}},
			Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "v1"},
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: app\n"}},
				Targets:   []fleet.BundleTarget{{ClusterSelector: sel("all", "yes")}}}})
		Expect(err).NotTo(HaveOccurred())

		By("the canary first; the gates go with it")
		Eventually(onValue(ns, "v1")).Should(Equal([]string{"a"}))
		Expect(deployments(ns, "app")["a"].Annotations[fleet.RolloutGatesAnnotation]).To(ContainSubstring(`"web"`))
		Consistently(onValue(ns, "v1"), "1s").Should(Equal([]string{"a"}))
		agentGates(deployments(ns, "app")["a"], true)
		By("the second stage after the canary's soak, then the approval")
		Eventually(onValue(ns, "v1"), "20s").Should(Equal([]string{"a", "b"}))
		agentGates(deployments(ns, "app")["b"], true)
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutWaitingForApproval))
		Consistently(onValue(ns, "v1"), "1s").Should(Equal([]string{"a", "b"}))
		approve(ns, rolloutOf(ns)().Revision+"/rest")
		Eventually(onValue(ns, "v1"), "20s").Should(Equal([]string{"a", "b", "c"}))
		agentGates(deployments(ns, "app")["c"], true)
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutComplete))
		v1ID := deployments(ns, "app")["a"].Spec.DeploymentID
		// The Rollout is its Bundle's, written through the Rollouts' own apply set.
		roll, err := api.Rollout().Get(ns, "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		owner := metav1.GetControllerOf(roll)
		Expect(owner).NotTo(BeNil())
		Expect(owner.Kind + "/" + owner.Name).To(Equal("Bundle/app"))
		Expect(roll.Annotations).To(HaveKeyWithValue("objectset.rio.cattle.io/id", "fleet-rollout"))

		By("a new revision whose canary fails its gate reaches no other cluster and is rolled back")
		updateBundle(ns, "app", func(b *fleet.Bundle) { b.Spec.DefaultNamespace = "v2" })
		Eventually(onValue(ns, "v2")).Should(Equal([]string{"a"}))
		// What a rollback returns to is the Rollout's, typed: the revision that passed.
		Eventually(func() string {
			if p := rolloutOf(ns)().Passed; p != nil {
				return p.Options.DefaultNamespace
			}
			return ""
		}).Should(Equal("v1"))
		Expect(deployments(ns, "app")["a"].Annotations).NotTo(HaveKey(fleet.RolloutPreviousAnnotation))
		agentGates(deployments(ns, "app")["a"], false)
		Eventually(func() string { return deployments(ns, "app")["a"].Spec.DeploymentID }, "20s").Should(Equal(v1ID))
		Expect(onValue(ns, "v2")()).To(BeEmpty())
		// The Rollout's status is written after the deployments it rolled back.
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutRolledBack))
		st := rolloutOf(ns)()
		Expect(st.Failures).To(ConsistOf(fleet.RolloutFailure{Cluster: "a", Stage: "canary", Gate: "web", Reason: "GET http://web/: status 500"}))
		Eventually(func() string {
			c := fleet.FindCondition(bundleStatus(ns, "app")().Conditions, fleet.ConditionRollout)
			if c == nil {
				return ""
			}
			return string(c.Status) + " " + c.Message
		}).Should(ContainSubstring("False halted in stage canary: 1 of 1 clusters failed (budget 0); cluster a failed gate web: GET http://web/: status 500; updated clusters go back"))
		Consistently(onValue(ns, "v2"), "2s").Should(BeEmpty())
	})

	It("returns every cluster to the revision that passed, whose Content the Rollout keeps from collection", func(ctx context.Context) {
		ns := atOnce(ctx, "a", "b")
		Eventually(onValue(ns, "v1")).Should(Equal([]string{"a", "b"}))
		for _, bd := range deployments(ns, "app") {
			agentGates(bd, true)
		}
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutComplete))
		v1 := deployments(ns, "app")["a"]
		v1Content := v1.Labels[fleet.ContentNameLabel]

		By("a revision with new resources reaches both clusters; no deployment names the first Content any more")
		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Spec.DefaultNamespace = "v2"
			b.Spec.Resources[0].Content = "kind: ConfigMap\nmetadata:\n  name: app\ndata:\n  v: two\n"
		})
		Eventually(onValue(ns, "v2")).Should(Equal([]string{"a", "b"}))
		Expect(deployments(ns, "app")["b"].Labels[fleet.ContentNameLabel]).NotTo(Equal(v1Content))
		Eventually(func() string {
			if p := rolloutOf(ns)().Passed; p != nil {
				return p.Content
			}
			return ""
		}).Should(Equal(v1Content))
		// Past the suite's grace period of 2 s, the Rollout alone keeps the first Content.
		Consistently(func() error { _, err := api.Content().Get(v1Content, metav1.GetOptions{}); return err }, "8s").Should(Succeed())

		By("a failing gate returns both clusters to the first revision, as it was deployed")
		agentGates(deployments(ns, "app")["a"], false)
		Eventually(onValue(ns, "v1"), "20s").Should(Equal([]string{"a", "b"}))
		for c, bd := range deployments(ns, "app") {
			Expect(bd.Spec.DeploymentID).To(Equal(v1.Spec.DeploymentID), c)
			Expect(bd.Labels[fleet.ContentNameLabel]).To(Equal(v1Content), c)
		}
		Expect(api.Content().Get(v1Content, metav1.GetOptions{})).NotTo(BeNil())
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutRolledBack))
	})

	It("keeps the Helm values of the revisions it keeps out of the Rollout, and returns the clusters to them", func(ctx context.Context) {
		ns := atOnce(ctx, "a", "b")
		withMode := func(mode string) func(*fleet.Bundle) {
			return func(b *fleet.Bundle) {
				b.Spec.DefaultNamespace = mode
				b.Spec.Helm = &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"password": "secret-" + mode}}}
			}
		}
		updateBundle(ns, "app", withMode("v1"))
		Eventually(onValue(ns, "v1")).Should(Equal([]string{"a", "b"}))
		for _, bd := range deployments(ns, "app") {
			agentGates(bd, true)
		}
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutComplete))
		v1 := deployedOn(ns, "app")()
		Expect(v1["a"].Options.Helm.Values.Data).To(HaveKeyWithValue("password", "secret-v1"))

		By("the next revision: neither revision's values are in the Rollout, both are in its values Secret")
		updateBundle(ns, "app", withMode("v2"))
		Eventually(onValue(ns, "v2")).Should(Equal([]string{"a", "b"}))
		Eventually(func() string {
			if p := rolloutOf(ns)().Passed; p != nil {
				return p.Options.DefaultNamespace
			}
			return ""
		}).Should(Equal("v1"))
		roll, err := api.Rollout().Get(ns, "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		raw, err := json.Marshal(roll)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring("secret-v"), "whoever reads rollouts reads no values")
		Expect(roll.Status.Passed.ValuesHash).NotTo(BeEmpty())
		Expect(roll.Status.Current.ValuesHash).NotTo(Equal(roll.Status.Passed.ValuesHash))
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, "app.values", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(s.Type)).To(Equal(fleet.SecretTypeRevisionValues))
		Expect(metav1.GetControllerOf(s).UID).To(Equal(roll.UID))
		Expect(s.Data).To(HaveKeyWithValue(roll.Status.Passed.ValuesHash+".values.yaml", []byte(`{"password":"secret-v1"}`)))
		Expect(s.Data).To(HaveKeyWithValue(roll.Status.Current.ValuesHash+".values.yaml", []byte(`{"password":"secret-v2"}`)))

		By("a failing gate returns both clusters to the first revision, its values included")
		agentGates(deployments(ns, "app")["a"], false)
		Eventually(deployedOn(ns, "app"), "20s").Should(Equal(v1))
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutRolledBack))
	})

	It("refuses a policy whose stages overlap, naming them, and touches nothing deployed", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "a", map[string]string{"all": "yes"})
		_, err := api.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "overlap", Namespace: ns},
			Spec: fleet.RolloutPolicySpec{Stages: []fleet.RolloutStage{{Name: "one", ClusterName: "a"}, {Name: "two", ClusterSelector: sel("all", "yes")}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
			Annotations: map[string]string{fleet.RolloutPolicyAnnotation: "overlap"}},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: app\n"}},
				Targets: []fleet.BundleTarget{{ClusterSelector: sel("all", "yes")}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return rolloutOf(ns)().Message }).Should(ContainSubstring("stages[1] (two) selects cluster a, which stages[0] (one) selects too"))
		Expect(rolloutOf(ns)().Phase).To(Equal(fleet.RolloutInvalid))
		Expect(deployments(ns, "app")["a"].Spec.DeploymentID).To(BeEmpty())
	})
})

func approve(ns, entry string) {
	Eventually(func() error {
		r, err := api.Rollout().Get(ns, "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Spec.Approved = append(r.Spec.Approved, entry)
		_, err = api.Rollout().Update(r)
		return err
	}).Should(Succeed())
}

var _ = Describe("a Rollout's status written by a tenant", func() {
	It("never makes a rollback deploy a Content the manager did not keep for that Bundle", func(ctx context.Context) {
		ns := atOnce(ctx, "a")
		Eventually(onValue(ns, "v1")).Should(Equal([]string{"a"}))
		agentGates(deployments(ns, "app")["a"], true)
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutComplete))
		updateBundle(ns, "app", func(b *fleet.Bundle) { b.Spec.DefaultNamespace = "v2" })
		Eventually(onValue(ns, "v2")).Should(Equal([]string{"a"}))
		Eventually(func() string { return passedSeal(ns) }).ShouldNot(BeEmpty())

		By("a tenant who may write rollouts/status names another team's Content as the revision that passed")
		other := "s-" + strings.Repeat("0", 61)
		_, err := api.Content().Create(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: other}, Content: []byte("another team's")})
		Expect(err).NotTo(HaveOccurred())
		cfg, err := testenv.Identity(ctx, kube, cluster.RESTConfig(), ns, "tenant", []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"},
			Resources: []string{"rollouts", "rollouts/status"}, Verbs: []string{"get", "update"}}})
		Expect(err).NotTo(HaveOccurred())
		tenant, err := fleetfactory.NewFactoryFromConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		passedContent := func() string {
			if p := rolloutOf(ns)().Passed; p != nil {
				return p.Content
			}
			return ""
		}
		// The manager may still write a status it computed before (over the forgery, which is
		// fine): forge until the forgery holds.
		Eventually(func(g Gomega) {
			r, err := tenant.Fleet().V1alpha1().Rollout().Get(ns, "app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			if r.Status.Passed.Content != other {
				r.Status.Passed.Content = other
				_, err = tenant.Fleet().V1alpha1().Rollout().UpdateStatus(r)
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Consistently(passedContent, "2s").Should(Equal(other))
		}, "30s").Should(Succeed())

		By("the canary fails its gate: no rollback to the forged revision, the cluster stays where it is")
		agentGates(deployments(ns, "app")["a"], false)
		Consistently(func() string { return deployments(ns, "app")["a"].Labels[fleet.ContentNameLabel] }, "5s").ShouldNot(Equal(other))
		Eventually(func() string { return rolloutOf(ns)().Phase }, "20s").Should(Equal(fleet.RolloutRolledBack))
		Eventually(func() string { return rolloutOf(ns)().Message }).Should(ContainSubstring("not rolled back: rollout " + ns + "/app: status.passed"))
		st := rolloutOf(ns)()
		Expect(onValue(ns, "v2")()).To(Equal([]string{"a"}), "%+v\n%+v\n%+v", deployments(ns, "app")["a"].Spec, st.Passed, st.Current)
	})
})

func passedSeal(ns string) string {
	if p := rolloutOf(ns)().Passed; p != nil {
		return p.Seal
	}
	return ""
}

// atOnce is a new namespace with checked-in clusters (labelled all=yes) and a Bundle "app"
// (defaultNamespace v1) rolling out to them by the RolloutPolicy "at-once": one stage, no
// failure budget, the gate "web".
func atOnce(ctx context.Context, clusters ...string) string {
	ns := newNamespace(ctx)
	for _, n := range clusters {
		newCluster(ns, n, map[string]string{"all": "yes"})
	}
	keepCheckingIn(ns, clusters...)
	_, err := api.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "at-once", Namespace: ns},
		Spec: fleet.RolloutPolicySpec{Stages: []fleet.RolloutStage{{Name: "all", FailureBudget: 0}},
			Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web/"}}}}})
	Expect(err).NotTo(HaveOccurred())
	_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
		Annotations: map[string]string{fleet.RolloutPolicyAnnotation: "at-once"}},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "v1"},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: app\ndata:\n  v: one\n"}},
			Targets:   []fleet.BundleTarget{{ClusterSelector: sel("all", "yes")}}}})
	Expect(err).NotTo(HaveOccurred())
	return ns
}
