package controller_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	clihistory "github.com/fleetgo/fleet/internal/cli/history"
	"github.com/fleetgo/fleet/internal/history"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
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
		_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns, Labels: map[string]string{fleet.CommitLabel: "c1"}},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: one\n"}},
				Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(clusterNames(ns, "app")).Should(Equal([]string{"dev", "prod"}))
		for _, bd := range deployments(ns, "app") {
			agentDeploys(bd, true)
		}
		Eventually(func(g Gomega) {
			rec := recordOf(ns, "app")
			g.Expect(rec.Clusters).To(ConsistOf("dev", "prod"))
			g.Expect(rec.Revisions).To(HaveLen(1))
			g.Expect(rec.Revisions[0].Commit).To(Equal("c1"))
			g.Expect(rec.Revisions[0].Spans).To(HaveLen(1), "both clusters moved together")
			g.Expect(rec.Revisions[0].Spans[0].Ready).NotTo(BeNil(), "both report it ready")
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
		Expect(ranAt(ns, "app", "dev", time.Now())).To(Equal("c2"))
		Expect(ranAt(ns, "app", "prod", time.Now())).To(BeEmpty())

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
