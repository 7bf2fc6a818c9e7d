package controller_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/bundlevalues"
	clihistory "github.com/fleetgo/fleet/internal/cli/history"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	recorder "github.com/fleetgo/fleet/internal/controller/history"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/history"
	"github.com/fleetgo/fleet/internal/leader"
	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

// recordOf is the deployment history the manager stored for a Bundle.
func recordOf(ns, bundle string) *history.Record {
	table, err := api.BundleHistory().Get(ns, bundle, metav1.GetOptions{})
	if err != nil {
		table = nil
	}
	list, err := api.BundleRevision().List(ns, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=" + bundle})
	Expect(err).NotTo(HaveOccurred())
	var revs []*fleet.BundleRevision
	for i := range list.Items {
		revs = append(revs, &list.Items[i])
	}
	return history.FromObjects(table, revs)
}

// ranAt is the revision and commit a cluster ran at t, by the stored history.
func ranAt(ns, bundle, cluster string, t time.Time) string {
	ran, ok := recordOf(ns, bundle).At(cluster, t)
	if !ok {
		return ""
	}
	return ran.Commit
}

var _ = Describe("deployment history", func() {
	It("records which revision each cluster ran, from its promotion until it was replaced or removed", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "dev", map[string]string{"env": "dev"})
		newCluster(ns, "prod", map[string]string{"env": "prod"})
		keepCheckingIn(ns, "dev", "prod")
		var out string
		appAtC1(ns, "one")
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"dev", "prod"}))
		for _, bd := range deployments(ns, "app") {
			agentDeploys(bd, true)
		}
		Eventually(func(g Gomega) {
			rec := recordOf(ns, "app")
			g.Expect(rec.Clusters).To(ConsistOf("dev", "prod"))
			g.Expect(rec.Revisions).To(HaveLen(1))
			g.Expect(rec.Revisions[0].Commit).To(Equal("c1"))
			// Both clusters moved in one pass or two (a span is one pass's move): each ran it once,
			// and reports it ready.
			for _, c := range []string{"dev", "prod"} {
				runs := rec.Of(c)
				g.Expect(runs).To(HaveLen(1), c)
				g.Expect(runs[0].Commit).To(Equal("c1"), c)
				g.Expect(runs[0].Ready).NotTo(BeNil(), "%s reports it ready", c)
			}
			g.Expect(len(rec.Revisions[0].Spans)).To(BeNumerically("<=", 2))
		}, time.Minute).Should(Succeed())
		first := time.Now()
		firstContent := deployments(ns, "app")["dev"].Labels[fleet.ContentNameLabel]
		revs, err := api.BundleRevision().List(ns, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=app"})
		Expect(err).NotTo(HaveOccurred())
		Expect(revs.Items).To(HaveLen(1))
		in := revs.Items[0].Spec.Inputs
		Expect(in).NotTo(BeNil(), "what the revision deploys is recorded")
		Expect(in.Content).To(Equal(firstContent))
		Expect(in.Revision).To(Equal(revs.Items[0].Spec.Revision))
		Expect(in.Seal).NotTo(BeEmpty())

		// A new commit that only the dev cluster gets: prod's deployment is removed.
		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Labels[fleet.CommitLabel] = "c2"
			b.Spec.Resources[0].Content = "kind: ConfigMap\nmetadata:\n  name: two\n"
			b.Spec.Targets = []fleet.BundleTarget{{ClusterSelector: sel("env", "dev")}}
		})
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"dev"}))
		Eventually(func() string { return deployments(ns, "app")["dev"].Labels[fleet.CommitLabel] }).Should(Equal("c2"))
		agentDeploys(deployments(ns, "app")["dev"], true)
		Eventually(func(g Gomega) {
			rec := recordOf(ns, "app")
			g.Expect(rec.Revisions).To(HaveLen(2))
			g.Expect(rec.Of("prod")).To(HaveLen(1))
			g.Expect(rec.Of("prod")[0].Ended).To(Equal(history.Removed))
			dev := rec.Of("dev")
			g.Expect(dev).To(HaveLen(2))
			g.Expect(dev[0].Ended).To(Equal(history.Replaced))
			g.Expect(dev[1].Commit).To(Equal("c2"))
			g.Expect(dev[1].Until).To(BeNil())
			g.Expect(dev[1].Ready).NotTo(BeNil())
		}, time.Minute).Should(Succeed())
		Expect(ranAt(ns, "app", "dev", first)).To(Equal("c1"))
		Expect(ranAt(ns, "app", "prod", first)).To(Equal("c1"))
		// The record keeps whole seconds, a pass's and a move's rounded up: within the second of
		// the last pass, what ran before still runs.
		Eventually(func() string { return ranAt(ns, "app", "dev", time.Now()) }, 10*time.Second).Should(Equal("c2"))
		Eventually(func() string { return ranAt(ns, "app", "prod", time.Now()) }, 10*time.Second).Should(BeEmpty())

		By("the first revision's Content is kept while the record keeps the revision")
		Consistently(func() error {
			_, err := api.Content().Get(firstContent, metav1.GetOptions{})
			return err
		}, "10s").Should(Succeed())

		By("fleet history answers from the same record")
		out, err = testenv.FleetCLI("history", "--kubeconfig", cluster.Kubeconfig, "-n", ns, "--cluster", "prod", "--at", first.UTC().Format(time.RFC3339), "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var rows []clihistory.Row
		Expect(json.Unmarshal([]byte(out), &rows)).To(Succeed())
		Expect(rows).To(HaveLen(1))
		Expect(rows[0].Bundle).To(Equal("app"))
		Expect(rows[0].Commit).To(Equal("c1"))
		Expect(rows[0].Ended).To(Equal(history.Removed))
		out, err = testenv.FleetCLI("history", "app", "--kubeconfig", cluster.Kubeconfig, "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`(?m)^app\s+\w{12}\s+c1\s+\S+\s+2\s+0\s+\S+Z$`), "c1: two clusters ran it, none now")
		Expect(out).To(MatchRegexp(`(?m)^app\s+\w{12}\s+c2\s+\S+\s+1\s+1\s+-$`), "c2: one cluster runs it")
		_, err = testenv.FleetCLI("history", "app", "--kubeconfig", cluster.Kubeconfig, "-n", ns, "--at", "2020-01-01T00:00:00Z")
		Expect(err).To(MatchError(ContainSubstring("is before the record")))

		By("the record outlives the Bundle: its last revision ends as removed")
		Expect(api.Bundle().Delete(ns, "app", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() string {
			dev := recordOf(ns, "app").Of("dev")
			return dev[len(dev)-1].Ended
		}, time.Minute).Should(Equal(history.Removed))
	})
})

// deployed is what a cluster's deployment deploys: its Content, options and deployment ID.
type deployed struct {
	Content, DeploymentID string
	Options               fleet.BundleDeploymentOptions
}

func deployedOf(bd *fleet.BundleDeployment) deployed {
	if bd == nil {
		return deployed{}
	}
	opts := &bd.Spec.Options
	if bd.Spec.ValuesHash != "" {
		// Its Helm values are in its options Secret: what it deploys is the two together.
		s, err := kube.CoreV1().Secrets(bd.Namespace).Get(context.Background(), bd.Name, metav1.GetOptions{})
		if err == nil {
			opts, err = bundlevalues.DeploymentOptions(bd, s)
		}
		if err != nil {
			return deployed{DeploymentID: "values not readable: " + err.Error()}
		}
	}
	return deployed{Content: bd.Labels[fleet.ContentNameLabel], DeploymentID: bd.Spec.DeploymentID, Options: *opts}
}

// deployedOn is what each cluster's deployment of the bundle deploys, by cluster name.
func deployedOn(ns, bundle string) func() map[string]deployed {
	return func() map[string]deployed {
		out := map[string]deployed{}
		for c, bd := range deployments(ns, bundle) {
			out[c] = deployedOf(bd)
		}
		return out
	}
}

// appAtC1 creates the Bundle "app" at commit c1, a ConfigMap of that name, for every cluster.
func appAtC1(ns, configMap string) {
	_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns, Labels: map[string]string{fleet.CommitLabel: "c1"}},
		Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: " + configMap + "\n"}},
			Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}})
	Expect(err).NotTo(HaveOccurred())
}

// heldCondition is the message of a Bundle's Held condition ("" without one).
func heldCondition(ns, name string) string {
	b, err := api.Bundle().Get(ns, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionHeld); c != nil {
		return string(c.Status) + " " + c.Reason + ": " + c.Message
	}
	return ""
}

var _ = Describe("a record written by an older manager", func() {
	It("has the Helm values its inputs hold moved into the record's own Secret", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "dev", map[string]string{"env": "dev"})
		keepCheckingIn(ns, "dev")
		appAtC1(ns, "one")
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"dev"}))
		agentDeploys(deployments(ns, "app")["dev"], true)
		var c1 *fleet.BundleRevision
		Eventually(func(g Gomega) {
			revs, err := api.BundleRevision().List(ns, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=app"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(revs.Items).To(HaveLen(1))
			g.Expect(revs.Items[0].Spec.Inputs).NotTo(BeNil())
			c1 = &revs.Items[0]
		}, time.Minute).Should(Succeed())
		// As a manager before revision-values Secrets recorded it: the values in the inputs.
		c1.Spec.Inputs.Options.Helm = &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"mode": "old"}}}
		_, err := api.BundleRevision().Update(c1)
		Expect(err).NotTo(HaveOccurred())

		By("the recorder's next write of the record moves them")
		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Labels[fleet.CommitLabel] = "c2"
			b.Spec.Resources[0].Content = "kind: ConfigMap\nmetadata:\n  name: two\n"
		})
		Eventually(func() string { return deployments(ns, "app")["dev"].Labels[fleet.CommitLabel] }).Should(Equal("c2"))
		agentDeploys(deployments(ns, "app")["dev"], true)
		Eventually(func(g Gomega) {
			o, err := api.BundleRevision().Get(ns, c1.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(o.Spec.Inputs.Options.Helm == nil || o.Spec.Inputs.Options.Helm.Values == nil).To(BeTrue(), "no values left in the record")
			g.Expect(o.Spec.Inputs.ValuesHash).NotTo(BeEmpty())
			s, err := kube.CoreV1().Secrets(ns).Get(ctx, c1.Name+".values", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Data).To(HaveKeyWithValue(o.Spec.Inputs.ValuesHash+".values.yaml", []byte(`{"mode":"old"}`)))
		}, time.Minute).Should(Succeed())
	})
})

var _ = Describe("fleet rollback", func() {
	It("puts the chosen clusters back to an earlier revision, byte for byte, held until the Bundle's next revision or released", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "dev1", map[string]string{"env": "dev", "n": "1"})
		newCluster(ns, "dev2", map[string]string{"env": "dev", "n": "2"})
		newCluster(ns, "prod", map[string]string{"env": "prod"})
		keepCheckingIn(ns, "dev1", "dev2", "prod")
		commit := func(c, content, mode string) map[string]deployed {
			updateBundle(ns, "app", func(b *fleet.Bundle) {
				b.Labels[fleet.CommitLabel] = c
				b.Spec.Resources[0].Content = content
				b.Spec.Helm = &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"mode": mode}}}
			})
			Eventually(func() []string {
				var commits []string
				for _, bd := range deployments(ns, "app") {
					commits = append(commits, bd.Labels[fleet.CommitLabel])
				}
				return commits
			}).Should(HaveEach(c))
			for _, bd := range deployments(ns, "app") {
				agentDeploys(bd, true)
			}
			return deployedOn(ns, "app")()
		}
		_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns, Labels: map[string]string{fleet.CommitLabel: "c0"}},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: zero\n"}},
				Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"dev1", "dev2", "prod"}))
		first := commit("c1", "kind: ConfigMap\nmetadata:\n  name: one\n", "first")
		Eventually(func() []string {
			var commits []string
			for _, r := range recordOf(ns, "app").Revisions {
				commits = append(commits, r.Commit)
			}
			return commits
		}, time.Minute).Should(ContainElement("c1"), "the history recorded c1 (with what it deploys)")
		By("the record of c1 holds its values' fingerprint; the values are in the record's own Secret")
		var c1 *fleet.BundleRevision
		Eventually(func(g Gomega) {
			list, err := api.BundleRevision().List(ns, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			for i := range list.Items {
				if list.Items[i].Spec.Commit == "c1" {
					c1 = &list.Items[i]
				}
			}
			g.Expect(c1).NotTo(BeNil())
			g.Expect(c1.Spec.Inputs).NotTo(BeNil())
		}).Should(Succeed())
		raw, err := json.Marshal(c1)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(`"mode"`), "whoever reads bundlerevisions reads no values")
		Expect(c1.Spec.Inputs.ValuesHash).NotTo(BeEmpty())
		var values *corev1.Secret
		Eventually(func() error {
			values, err = kube.CoreV1().Secrets(ns).Get(context.Background(), c1.Name+".values", metav1.GetOptions{})
			return err
		}).Should(Succeed())
		Expect(string(values.Type)).To(Equal(fleet.SecretTypeRevisionValues))
		Expect(metav1.GetControllerOf(values).UID).To(Equal(c1.UID))
		Expect(values.Data).To(HaveKeyWithValue(c1.Spec.Inputs.ValuesHash+".values.yaml", []byte(`{"mode":"first"}`)))

		second := commit("c2", "kind: ConfigMap\nmetadata:\n  name: two\n", "second")
		Expect(second["dev1"]).NotTo(Equal(first["dev1"]))

		By("bad input is refused, naming it, and changes nothing")
		cli := func(args ...string) (string, error) {
			return testenv.FleetCLI(append([]string{"rollback", "app", "--kubeconfig", cluster.Kubeconfig, "-n", ns}, args...)...)
		}
		_, err = cli("--to", "nosuchcommit")
		Expect(err).To(MatchError(ContainSubstring("--to nosuchcommit: no revision or commit of that name")))
		_, err = cli("--to", "c1", "--clusters", "env=staging")
		Expect(err).To(MatchError(ContainSubstring("--clusters env=staging matches no cluster")))
		_, err = cli("--to", "2020-01-01T00:00:00Z")
		Expect(err).To(MatchError(ContainSubstring("none of the chosen clusters ran the Bundle then")))
		hist, err := api.BundleHistory().Get(ns, "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(hist.Spec.Holds).To(BeEmpty())

		By("the dev clusters go back to c1, prod stays at c2")
		out, err := cli("--to", "c1", "--clusters", "env=dev", "--reason", "incident 42")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("bundle app: 2 clusters held at revision"))
		Eventually(deployedOn(ns, "app")).Should(Equal(map[string]deployed{"dev1": first["dev1"], "dev2": first["dev2"], "prod": second["prod"]}))
		Eventually(func() string { return heldCondition(ns, "app") }).Should(MatchRegexp(`^True RolledBack: 2 of 2 clusters held at revision \w+ \(commit c1\) since \S+: incident 42`))
		Consistently(deployedOn(ns, "app"), "3s").Should(HaveKeyWithValue("dev1", first["dev1"]), "held: not promoted again")
		for _, c := range []string{"dev1", "dev2"} {
			agentDeploys(deployments(ns, "app")[c], true)
		}
		Eventually(func(g Gomega) {
			rec := recordOf(ns, "app")
			dev := rec.Of("dev1")
			g.Expect(len(dev)).To(BeNumerically(">=", 3), "c0 (maybe), c1, c2, c1 again: %+v", rec)
			g.Expect(dev[len(dev)-1].Commit).To(Equal("c1"))
			g.Expect(dev[len(dev)-2].Ended).To(Equal(history.RolledBack))
		}, time.Minute).Should(Succeed(), "the history shows the rollback")

		By("--release takes dev2 back to the Bundle's revision; dev1 stays held")
		out, err = cli("--release", "--clusters", "n=2")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("1 clusters released: " + ns + "/dev2"))
		Eventually(deployedOn(ns, "app")).Should(Equal(map[string]deployed{"dev1": first["dev1"], "dev2": second["dev2"], "prod": second["prod"]}))
		Eventually(func() string { return heldCondition(ns, "app") }).Should(ContainSubstring("1 of 1 clusters held"))

		By("the next commit releases dev1")
		third := commit("c3", "kind: ConfigMap\nmetadata:\n  name: three\n", "third")
		Expect(third["dev1"].Options.Helm.Values.Data).To(HaveKeyWithValue("mode", "third"))
		Eventually(func() string { return heldCondition(ns, "app") }).Should(BeEmpty())
		Expect(deployments(ns, "app")["dev1"].Annotations).NotTo(HaveKey(fleet.HeldAnnotation))
	})
})

var _ = Describe("a rollback to a revision whose record was forged", func() {
	It("is refused with the Held condition saying why, and the clusters keep what they run", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "one", nil)
		keepCheckingIn(ns, "one")
		appAtC1(ns, "one")
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"one"}))
		agentDeploys(deployments(ns, "app")["one"], true)
		var rev *fleet.BundleRevision
		Eventually(func(g Gomega) {
			list, err := api.BundleRevision().List(ns, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(1))
			g.Expect(list.Items[0].Spec.Inputs).NotTo(BeNil())
			rev = &list.Items[0]
		}, time.Minute).Should(Succeed())
		before := deployedOn(ns, "app")()
		b, err := api.Bundle().Get(ns, "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		over, err := rollout.RevisionOf(b)
		Expect(err).NotTo(HaveOccurred())

		By("whoever may write bundlerevisions points the revision at another Content, keeping its seal")
		// The recorder writes both objects' status meanwhile: each write reads them again after a conflict.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.BundleRevision().Get(ns, rev.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Inputs.Content = "s-another-namespaces-content"
			_, err = api.BundleRevision().Update(cur)
			return err
		})).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			hist, err := api.BundleHistory().Get(ns, "app", metav1.GetOptions{})
			if err != nil {
				return err
			}
			hist.Spec.Holds = []fleet.RevisionHold{{Revision: rev.Spec.Revision, Clusters: []string{ns + "/one"}, Over: over, Since: metav1.Now()}}
			_, err = api.BundleHistory().Update(hist)
			return err
		})).To(Succeed())
		Eventually(func() string { return heldCondition(ns, "app") }).Should(
			ContainSubstring("False HoldRefused: not held at revision " + rev.Spec.Revision + ": revision " + rev.Spec.Revision + ": its record was not made by the fleet manager for this Bundle"))
		Consistently(deployedOn(ns, "app"), "3s").Should(Equal(before))
	})
})

var _ = Describe("the deployment history's recorder", func() {
	It("records every revision a deployment moved through, however far the shared queue of deployments lags behind", func(ctx context.Context) {
		// A recorder of its own, for the deployments of a shard no controller serves, beside a
		// handler of the same queue that takes two seconds a turn: while it runs, a deployment
		// moves through a revision no turn of that queue ever sees.
		const shard = "recorder-test"
		f, err := fleetfactory.NewFactoryFromConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		bds := f.Fleet().V1alpha1().BundleDeployment()
		index.Register(bds)
		bds.OnChange(ctx, "slow", func(_ string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
			time.Sleep(2 * time.Second)
			return bd, nil
		})
		recorder.Register(ctx, recorder.Deps{BundleDeployments: bds, Histories: f.Fleet().V1alpha1().BundleHistory(),
			Revisions: f.Fleet().V1alpha1().BundleRevision(), SealKey: []byte("test"), Mine: controller.ShardSelector(shard)})
		Expect(f.Start(ctx, 2)).To(Succeed())

		ns := newNamespace(ctx)
		bd, err := api.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app-edge", Namespace: ns,
			Labels: map[string]string{fleet.ShardLabel: shard, fleet.BundleNamespaceLabel: ns, fleet.BundleLabel: "app",
				fleet.ClusterNamespaceLabel: ns, fleet.ClusterLabel: "edge", fleet.CommitLabel: "c1"},
			Annotations: map[string]string{fleet.RevisionAnnotation: "r1"}}})
		Expect(err).NotTo(HaveOccurred())
		for _, c := range []string{"c2", "c3"} {
			bd.Labels[fleet.CommitLabel] = c
			bd.Annotations[fleet.RevisionAnnotation] = "r" + c[1:]
			bd, err = api.BundleDeployment().Update(bd)
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func() []string {
			var commits []string
			for _, ran := range recordOf(ns, "app").Of("edge") {
				commits = append(commits, ran.Commit)
			}
			return commits
		}, time.Minute).Should(Equal([]string{"c1", "c2", "c3"}))
	})
})

var _ = Describe("the deployment history across a leader change", func() {
	It("keeps the record, records the moves the next leader makes, and the next leader keeps a rollback the first recorded", func(ctx context.Context) {
		own, ownAPI, err := testenv.StartWithCRDs(ctx, "history-leader")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(own.Stop)
		ownKube, err := own.Clientset()
		Expect(err).NotTo(HaveOccurred())
		// The helpers act on the suite's cluster: for this spec, on its own.
		saved, savedKube, savedCluster := api, kube, cluster
		api, kube, cluster = ownAPI, ownKube, own
		DeferCleanup(func() { api, kube, cluster = saved, savedKube, savedCluster })
		start := func() func() error {
			return testenv.RunController(own.RESTConfig(), config.Config{}, controller.Options{HealthAddr: freeAddr(), MetricsAddr: freeAddr(),
				LeaderElect: true, LeaderTiming: leader.Timing{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
				Config: config.NewStore(config.Config{AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}}.WithDefaults())})
		}
		stopFirst := start()
		firstStopped := false
		DeferCleanup(func() {
			if !firstStopped {
				Expect(stopFirst()).To(Succeed())
			}
		})

		ns := newNamespace(ctx)
		newCluster(ns, "dev", map[string]string{"env": "dev"})
		newCluster(ns, "prod", map[string]string{"env": "prod"})
		keepCheckingIn(ns, "dev", "prod")
		appAtC1(ns, "one")
		Eventually(clusterNames(ns, "app"), time.Minute).Should(Equal([]string{"dev", "prod"}))
		first := map[string]deployed{}
		for c, bd := range deployments(ns, "app") {
			agentDeploys(bd, true)
			first[c] = deployedOf(bd)
		}
		// Each cluster's promotion as the first leader recorded it (the two may move in one pass
		// or, when the manager saw one cluster a pass later, in two).
		promoted := map[string]metav1.Time{}
		Eventually(func(g Gomega) {
			rec := recordOf(ns, "app")
			g.Expect(rec.Revisions).To(HaveLen(1))
			g.Expect(rec.Revisions[0].Spans).NotTo(BeEmpty())
			for _, span := range rec.Revisions[0].Spans {
				g.Expect(span.Ready).NotTo(BeNil())
			}
			for _, c := range []string{"dev", "prod"} {
				ran := rec.Of(c)
				g.Expect(ran).To(HaveLen(1), "c1 on %s", c)
				promoted[c] = ran[0].Promoted
			}
		}, time.Minute).Should(Succeed())

		By("a second manager waits; the first stops; the second leads")
		stopSecond := start()
		DeferCleanup(func() { Expect(stopSecond()).To(Succeed()) })
		firstStopped = true
		Expect(stopFirst()).To(Succeed())
		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Labels[fleet.CommitLabel] = "c2"
			b.Spec.Resources[0].Content = "kind: ConfigMap\nmetadata:\n  name: two\n"
		})
		Eventually(func() string { return deployments(ns, "app")["dev"].Labels[fleet.CommitLabel] }, time.Minute).Should(Equal("c2"))
		for _, bd := range deployments(ns, "app") {
			agentDeploys(bd, true)
		}
		Eventually(func(g Gomega) {
			rec := recordOf(ns, "app")
			for _, c := range []string{"dev", "prod"} {
				ran := rec.Of(c)
				g.Expect(ran).To(HaveLen(2), "c1 then c2 on %s, nothing recorded twice: %+v", c, ran)
				g.Expect(ran[0].Commit).To(Equal("c1"))
				g.Expect(ran[0].Promoted).To(Equal(promoted[c]), "the first leader's record is kept as it was")
				g.Expect(ran[0].Ended).To(Equal(history.Replaced))
				g.Expect(ran[1].Commit).To(Equal("c2"))
			}
		}, time.Minute).Should(Succeed())

		By("a rollback to what the first leader recorded is kept by the second (the seal key is the installation's)")
		out, err := testenv.FleetCLI("rollback", "app", "--kubeconfig", own.Kubeconfig, "-n", ns, "--to", "c1", "--clusters", "env=dev")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() deployed { return deployedOf(deployments(ns, "app")["dev"]) }, time.Minute).Should(Equal(first["dev"]))
		Eventually(func() string { return heldCondition(ns, "app") }).Should(HavePrefix("True RolledBack: 1 of 1 clusters held"))
		Expect(deployedOf(deployments(ns, "app")["prod"])).NotTo(Equal(first["prod"]), "prod stays at c2")
	})
})

var _ = Describe("fleet rollback of a Bundle that rolls out by a RolloutPolicy", func() {
	It("goes through the policy's stages and gates, touches no other cluster, and does not become the revision that passed", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for _, c := range []string{"dev1", "dev2"} {
			newCluster(ns, c, map[string]string{"env": "dev"})
		}
		newCluster(ns, "prod", map[string]string{"env": "prod"})
		keepCheckingIn(ns, "dev1", "dev2", "prod")
		soak := &metav1.Duration{Duration: 2 * time.Second}
		_, err := api.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "careful", Namespace: ns},
			Spec: fleet.RolloutPolicySpec{
				Stages: []fleet.RolloutStage{{Name: "first", ClusterName: "dev1", Soak: soak}, {Name: "second", ClusterName: "dev2", Soak: soak}, {Name: "rest"}},
				Gates:  []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: "http://web/"}}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
			Labels: map[string]string{fleet.CommitLabel: "c1"}, Annotations: map[string]string{fleet.RolloutPolicyAnnotation: "careful"}},
			Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "v1"},
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: app\n"}},
				Targets:   []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}})
		Expect(err).NotTo(HaveOccurred())
		rollOut := func(value string) {
			for _, c := range []string{"dev1", "dev2", "prod"} {
				Eventually(func() string {
					if bd := deployments(ns, "app")[c]; bd != nil {
						return bd.Spec.Options.DefaultNamespace
					}
					return ""
				}, 30*time.Second).Should(Equal(value), c)
				agentGates(deployments(ns, "app")[c], true)
			}
			Eventually(func() string { return rolloutOf(ns)().Phase }, 30*time.Second).Should(Equal(fleet.RolloutComplete))
		}
		rollOut("v1")
		recorded := func(commit string) func() bool {
			return func() bool {
				for _, r := range recordOf(ns, "app").Revisions {
					if r.Commit == commit {
						return true
					}
				}
				return false
			}
		}
		Eventually(recorded("c1"), time.Minute).Should(BeTrue())
		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Labels[fleet.CommitLabel] = "c2"
			b.Spec.DefaultNamespace = "v2"
		})
		rollOut("v2")

		By("fleet rollback without --now holds the dev clusters through the stages: dev1 first")
		out, err := testenv.FleetCLI("rollback", "app", "--kubeconfig", cluster.Kubeconfig, "-n", ns, "--to", "c1", "--clusters", "env=dev")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("2 clusters held at revision"))
		Expect(out).To(ContainSubstring("through its RolloutPolicy's stages"))
		Eventually(onValue(ns, "v1"), 30*time.Second).Should(Equal([]string{"dev1"}))
		// The Rollout's own writer follows the pass that moved dev1.
		Eventually(func() bool { return rolloutOf(ns)().Hold }).Should(BeTrue(), "the Rollout shows the rollback")
		Expect(deployments(ns, "app")["dev1"].Annotations[fleet.RolloutGatesAnnotation]).To(ContainSubstring(`"web"`))
		Consistently(onValue(ns, "v1"), "1s").Should(Equal([]string{"dev1"}), "dev2 waits for dev1's gates and soak")
		agentGates(deployments(ns, "app")["dev1"], true)
		Eventually(onValue(ns, "v1"), 30*time.Second).Should(Equal([]string{"dev1", "dev2"}))
		agentGates(deployments(ns, "app")["dev2"], true)
		Eventually(func() string { return rolloutOf(ns)().Phase }, 30*time.Second).Should(Equal(fleet.RolloutComplete))
		Eventually(func() string { return heldCondition(ns, "app") }).Should(HavePrefix("True RolledBack: 2 of 2 clusters held"))
		Expect(onValue(ns, "v2")()).To(Equal([]string{"prod"}), "prod was never touched")

		By("the next revision rolls out from, and back to, what the whole Bundle passed: c2")
		updateBundle(ns, "app", func(b *fleet.Bundle) {
			b.Labels[fleet.CommitLabel] = "c3"
			b.Spec.DefaultNamespace = "v3"
		})
		Eventually(onValue(ns, "v3"), 30*time.Second).Should(Equal([]string{"dev1"}))
		Eventually(func(g Gomega) {
			st := rolloutOf(ns)()
			g.Expect(st.Hold).To(BeFalse())
			g.Expect(st.Passed).NotTo(BeNil())
			g.Expect(st.Passed.Options.DefaultNamespace).To(Equal("v2"))
		}).Should(Succeed())
		Eventually(func() string { return heldCondition(ns, "app") }).Should(BeEmpty())
	})
})

var _ = Describe("the deployment history's retention", func() {
	It("keeps as many revisions no cluster runs as the configuration's historyRevisions says, dropping the oldest with their records", func(ctx context.Context) {
		setConfig := func(doc string) {
			ctx := context.Background() // the spec's is done when its cleanup runs
			cms := kube.CoreV1().ConfigMaps("cattle-fleet-system")
			cm, err := cms.Get(ctx, config.ConfigMapName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: config.ConfigMapName, Namespace: "cattle-fleet-system"},
					Data: map[string]string{config.Key: doc}}, metav1.CreateOptions{})
			} else if err == nil {
				cm.Data = map[string]string{config.Key: doc}
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			}
			Expect(err).NotTo(HaveOccurred())
		}
		_, err := kube.CoreV1().ConfigMaps("cattle-fleet-system").Get(ctx, config.ConfigMapName, metav1.GetOptions{})
		had := err == nil
		setConfig(`{"agentCheckinInterval":"2s","historyRevisions":1}`)
		DeferCleanup(func() {
			// The configuration the suite runs with again, and the ConfigMap gone if it was
			// not there (another spec creates it).
			setConfig(`{"agentCheckinInterval":"2s"}`)
			Eventually(func() int { return inForce.Get().HistoryRevisions }).Should(BeZero())
			if !had {
				Expect(kube.CoreV1().ConfigMaps("cattle-fleet-system").Delete(context.Background(), config.ConfigMapName, metav1.DeleteOptions{})).To(Succeed())
			}
		})
		Eventually(func() int { return inForce.Get().HistoryRevisions }).Should(Equal(1))

		ns := newNamespace(ctx)
		newCluster(ns, "edge", nil)
		keepCheckingIn(ns, "edge")
		appAtC1(ns, "c1")
		commits := func() []string {
			var out []string
			for _, r := range recordOf(ns, "app").Revisions {
				out = append(out, r.Commit)
			}
			return out
		}
		for i, c := range []string{"c1", "c2", "c3"} {
			if i > 0 {
				updateBundle(ns, "app", func(b *fleet.Bundle) {
					b.Labels[fleet.CommitLabel] = c
					b.Spec.Resources[0].Content = "kind: ConfigMap\nmetadata:\n  name: " + c + "\n"
				})
			}
			Eventually(func() string {
				if bd := deployments(ns, "app")["edge"]; bd != nil {
					return bd.Labels[fleet.CommitLabel]
				}
				return ""
			}).Should(Equal(c))
			agentDeploys(deployments(ns, "app")["edge"], true)
			Eventually(commits, time.Minute).Should(ContainElement(c))
		}
		Eventually(commits, time.Minute).Should(Equal([]string{"c2", "c3"}), "c1 dropped: one revision no cluster runs is kept")
		list, err := api.BundleRevision().List(ns, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=app"})
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(HaveLen(2))
	})
})
