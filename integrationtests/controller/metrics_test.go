package controller_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func scrape(g Gomega) testenv.Families {
	f, err := testenv.Scrape(metricsAddr)
	g.Expect(err).NotTo(HaveOccurred())
	return f
}

func expectSample(g Gomega, families testenv.Families, family string, want map[string]string, value float64) {
	v, ok := families.Sample(family, want)
	g.Expect(ok).To(BeTrue(), "%s%v is missing", family, want)
	g.Expect(v).To(Equal(value), "%s%v", family, want)
}

// Fleet's metric families, with Fleet's names and labels, from the caches (docs/manager.md: Metrics).
var _ = It("exports Fleet's metric families for Bundles, BundleDeployments, Clusters, ClusterGroups and GitRepos, and drops the series of deleted objects", func(ctx context.Context) {
	ns := newNamespace(ctx)
	newCluster(ns, "m-ready", map[string]string{"metrics": "yes"})
	newCluster(ns, "m-slow", map[string]string{"metrics": "yes"})
	keepCheckingIn(ns, "m-ready", "m-slow")
	_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "m-group", Namespace: ns},
		Spec: fleet.ClusterGroupSpec{Selector: sel("metrics", "yes")}})
	Expect(err).NotTo(HaveOccurred())
	_, err = api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "m-app", Namespace: ns,
		Labels: map[string]string{fleet.RepoLabel: "m-repo"}},
		Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: m\n"}},
			Targets: []fleet.BundleTarget{{ClusterGroup: "m-group"}}}})
	Expect(err).NotTo(HaveOccurred())
	// (named apart from the Bundle's repo label: this GitRepo's runs never succeed)
	_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "m-git", Namespace: ns},
		Spec: fleet.GitRepoSpec{Repo: "https://git.invalid/m.git", Branch: "main", Paths: []string{"a", "b"}}})
	Expect(err).NotTo(HaveOccurred())

	var bds map[string]*fleet.BundleDeployment
	Eventually(func(g Gomega) {
		bds = deployments(ns, "m-app")
		g.Expect(bds).To(HaveLen(2))
		for _, bd := range bds {
			g.Expect(bd.Spec.DeploymentID).NotTo(BeEmpty())
		}
	}).Should(Succeed())
	agentDeploys(bds["m-ready"], true)
	agentDeploys(bds["m-slow"], false)

	Eventually(func(g Gomega) {
		f := scrape(g)
		bundle := map[string]string{"name": "m-app", "namespace": ns, "repo": "m-repo"}
		expectSample(g, f, "fleet_bundle_desired_ready", bundle, 2)
		expectSample(g, f, "fleet_bundle_ready", bundle, 1)
		expectSample(g, f, "fleet_bundle_not_ready", bundle, 1)
		expectSample(g, f, "fleet_bundle_wait_applied", bundle, 0)
		expectSample(g, f, "fleet_bundle_state", with(bundle, "state", "NotReady"), 1)
		expectSample(g, f, "fleet_bundle_state", with(bundle, "state", "Ready"), 0)

		bd := map[string]string{"name": "m-app", "bundle": "m-app", "bundle_namespace": ns, "repo": "m-repo", "cluster_namespace": ns}
		expectSample(g, f, "fleet_bundledeployment_state", with(with(bd, "cluster_name", "m-ready"), "state", "Ready"), 1)
		expectSample(g, f, "fleet_bundledeployment_state", with(with(bd, "cluster_name", "m-slow"), "state", "NotReady"), 1)
		expectSample(g, f, "fleet_bundledeployment_state", with(with(bd, "cluster_name", "m-slow"), "state", "Ready"), 0)

		expectSample(g, f, "fleet_cluster_state", map[string]string{"name": "m-ready", "namespace": ns, "state": "Ready"}, 1)
		expectSample(g, f, "fleet_cluster_state", map[string]string{"name": "m-slow", "namespace": ns, "state": "NotReady"}, 1)
		expectSample(g, f, "fleet_cluster_state", map[string]string{"name": "m-slow", "namespace": ns, "state": "WaitCheckIn"}, 0)
		expectSample(g, f, "fleet_cluster_resources_count_desiredready", map[string]string{"name": "m-ready", "namespace": ns}, 0)

		group := map[string]string{"name": "m-group", "namespace": ns}
		expectSample(g, f, "fleet_cluster_group_cluster_count", group, 2)
		expectSample(g, f, "fleet_cluster_group_non_ready_cluster_count", group, 1)
		expectSample(g, f, "fleet_cluster_group_bundle_desired_ready", group, 2)
		expectSample(g, f, "fleet_cluster_group_bundle_ready", group, 1)
		expectSample(g, f, "fleet_cluster_group_state", with(group, "state", "NotReady"), 1)
		expectSample(g, f, "fleet_cluster_group_resource_count_missing", group, 0)
		expectSample(g, f, "fleet_cluster_group_resource_count_notready", group, 0)

		repo := map[string]string{"name": "m-git", "namespace": ns, "repo": "https://git.invalid/m.git", "branch": "main", "paths": "a;b"}
		expectSample(g, f, "fleet_gitrepo_desired_ready_clusters", repo, 0)
		expectSample(g, f, "fleet_gitrepo_resources_not_ready", repo, 0)
		// The repository does not resolve: every poll fails, none succeeds.
		failures, ok := f.Sample("fleet_gitrepo_fetch_latest_commit_failure_total", map[string]string{"name": "m-git", "namespace": ns})
		g.Expect(ok).To(BeTrue())
		g.Expect(failures).To(BeNumerically(">=", 1))
		_, ok = f.Sample("fleet_gitrepo_fetch_latest_commit_success_total", map[string]string{"name": "m-git", "namespace": ns})
		g.Expect(ok).To(BeFalse())
	}).Should(Succeed())

	// All ready: the states follow.
	agentDeploys(bds["m-slow"], true)
	Eventually(func(g Gomega) {
		f := scrape(g)
		expectSample(g, f, "fleet_bundle_state", map[string]string{"name": "m-app", "namespace": ns, "state": "Ready"}, 1)
		expectSample(g, f, "fleet_cluster_group_state", map[string]string{"name": "m-group", "namespace": ns, "state": "Ready"}, 1)
		expectSample(g, f, "fleet_cluster_state", map[string]string{"name": "m-slow", "namespace": ns, "state": "Ready"}, 1)
	}).Should(Succeed())

	Expect(api.GitRepo().Delete(ns, "m-git", nil)).To(Succeed())
	Expect(api.Bundle().Delete(ns, "m-app", nil)).To(Succeed())
	Expect(api.ClusterGroup().Delete(ns, "m-group", nil)).To(Succeed())
	Expect(api.Cluster().Delete(ns, "m-ready", nil)).To(Succeed())
	Expect(api.Cluster().Delete(ns, "m-slow", nil)).To(Succeed())
	Eventually(func(g Gomega) {
		for name, fam := range scrape(g) {
			if !strings.HasPrefix(name, "fleet_") {
				continue
			}
			for _, m := range fam.Metric {
				for _, l := range m.Label {
					g.Expect(l.GetValue()).NotTo(Equal(ns), "%s still has a series of the deleted objects", name)
				}
			}
		}
	}).Should(Succeed())
})

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}
