package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/cli/history"
	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// historyRepo is a chart whose values say the commit's version, customized per env.
func historyRepo(version string) map[string]string {
	return map[string]string{
		"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"app/fleet.yaml": `defaultNamespace: hist-app
helm:
  releaseName: hist-app
  values:
    cluster: ${ .ClusterName }
    version: ` + version + `
targetCustomizations:
- name: dev
  clusterSelector:
    matchLabels: {env: dev}
  helm:
    values:
      level: debug
- name: prod
  clusterSelector:
    matchLabels: {env: prod}
  helm:
    values:
      replicas: 3
`,
		"app/values.yaml": "replicas: 1\nlevel: info\n",
		"app/templates/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: hist-settings
data:
  cluster: {{ .Values.cluster | quote }}
  version: {{ .Values.version | quote }}
  level: {{ .Values.level | quote }}
  replicas: {{ .Values.replicas | quote }}
`,
	}
}

// printRecord writes a Bundle's stored history to the spec's output (shown when it fails).
func printRecord(ns, bundle string) {
	if h, err := api.BundleHistory().Get(ns, bundle, metav1.GetOptions{}); err == nil {
		b, _ := json.MarshalIndent(h.Status, "", " ")
		GinkgoWriter.Printf("history of %s/%s: %s\n", ns, bundle, b)
	}
	revs, err := api.BundleRevision().List(ns, metav1.ListOptions{LabelSelector: fleet.HistoryBundleLabel + "=" + bundle})
	if err != nil {
		return
	}
	for _, r := range revs.Items {
		b, _ := json.MarshalIndent(map[string]any{"revision": r.Spec.Revision, "commit": r.Spec.Commit, "order": r.Spec.Order, "spans": r.Status.Spans}, "", " ")
		GinkgoWriter.Printf("revision: %s\n", b)
	}
}

// releaseManifests are the manifests of the release's revisions in a cluster, oldest first.
func releaseManifests(cfg *rest.Config, namespace, name string) []string {
	GinkgoHelper()
	kube, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	revs, err := storage.Init(driver.NewSecrets(kube.CoreV1().Secrets(namespace))).History(name)
	Expect(err).NotTo(HaveOccurred())
	out := make([]string, len(revs))
	for _, r := range revs {
		Expect(r.Version).To(BeNumerically("<=", len(revs)))
		out[r.Version-1] = r.Manifest
	}
	return out
}

var _ = Describe("deployment history and rollback", Ordered, func() {
	It("answers what each cluster ran at each commit as Helm's release history downstream says, and rolls only the dev cluster back, byte for byte, until the next commit", func(ctx context.Context) {
		type target struct {
			cfg    *rest.Config
			record string // the cluster's name in the history of a Bundle of fleet-default
		}
		targets := map[string]target{"dev": {dev.RESTConfig(), dev.name}, "prod": {prod.RESTConfig(), prod.name},
			"local": {manager.RESTConfig(), fleet.LocalNamespace + "/" + bootstrap.LocalClusterName}}
		serverTree := GinkgoT().TempDir()
		var commits []string
		var ats []time.Time                // a second at which each commit ran everywhere, before the next came
		manifests := map[string][]string{} // by target, per commit
		publish := func(version string) string {
			writeTree(serverTree, historyRepo(version))
			commit, err := git.Publish(ctx, "hist-demo", "main", serverTree, version)
			Expect(err).NotTo(HaveOccurred())
			return commit
		}
		for i, version := range []string{"v1", "v2", "v3"} {
			commit := publish(version)
			if i == 0 {
				toAllThree("hist-demo", "app")
			}
			expectGitRepoReady(fleet.DefaultNamespace, "hist-demo", commit, "3/3")
			commits = append(commits, commit)
			for name, t := range targets {
				revs := releaseManifests(t.cfg, "hist-app", "hist-app")
				Expect(revs).NotTo(BeEmpty())
				Expect(revs[len(revs)-1]).To(ContainSubstring("version: " + version))
				manifests[name] = append(manifests[name], revs[len(revs)-1])
			}
			// The record keeps whole seconds, a move rounded up: the next whole second is one
			// this commit ran at on every cluster, if the next commit comes after it.
			at := time.Now().Truncate(time.Second).Add(time.Second)
			ats = append(ats, at)
			Eventually(func() bool { return time.Now().After(at) }).Should(BeTrue())
		}

		By("fleet history says, for each cluster, the commits its agent deployed in the order Helm's history shows them, and what it runs now")
		historyOf := func(args ...string) func() []string {
			return func() []string {
				out, err := exec.Command(fleetBin, append([]string{"history", "hist-demo", "--kubeconfig", manager.Kubeconfig, "-o", "json"}, args...)...).CombinedOutput()
				if err != nil {
					return []string{string(out)}
				}
				var rows []history.Row
				if err := json.Unmarshal(out, &rows); err != nil {
					return []string{fmt.Sprintf("%s (%v)", out, err)}
				}
				var got []string
				for _, r := range rows {
					got = append(got, r.Commit)
				}
				return got
			}
		}
		DeferCleanup(printRecord, fleet.DefaultNamespace, "hist-demo-app")
		for name, t := range targets {
			Expect(releaseManifests(t.cfg, "hist-app", "hist-app")).To(Equal(manifests[name]), "one release revision per commit on %s", name)
			Eventually(historyOf("--cluster", t.record), time.Minute).Should(Equal(commits), "what %s ran, span by span", name)
			Eventually(historyOf("--cluster", t.record, "--at", "now"), time.Minute).Should(Equal(commits[2:]), "what %s runs now", name)
			for i, at := range ats {
				Expect(historyOf("--cluster", t.record, "--at", at.UTC().Format(time.RFC3339))()).To(Equal(commits[i:i+1]), "what %s ran at %s", name, at)
			}
		}

		By("fleet rollback --to the first commit --clusters env=dev puts only dev back, byte for byte")
		out, err := exec.Command(fleetBin, "rollback", "hist-demo", "--kubeconfig", manager.Kubeconfig, "--to", commits[0], "--clusters", "env=dev", "--reason", "e2e").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("1 clusters held at revision"))
		Eventually(func() string {
			revs := releaseManifests(dev.RESTConfig(), "hist-app", "hist-app")
			return revs[len(revs)-1]
		}, 2*time.Minute).Should(Equal(manifests["dev"][0]))
		for _, name := range []string{"prod", "local"} {
			revs := releaseManifests(targets[name].cfg, "hist-app", "hist-app")
			Expect(revs[len(revs)-1]).To(Equal(manifests[name][2]), "%s stays at the third commit", name)
		}
		Eventually(func() string {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "hist-demo", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			if c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionHeld); c != nil {
				return c.Message
			}
			return ""
		}).Should(ContainSubstring("1 of 1 clusters held at revision"))
		Expect(fleetCmd("status", "hist-demo", "--kubeconfig", manager.Kubeconfig)).To(ContainSubstring("rolled back: "))

		By("the next commit releases dev")
		commit := publish("v4")
		expectGitRepoReady(fleet.DefaultNamespace, "hist-demo", commit, "3/3")
		revs := releaseManifests(dev.RESTConfig(), "hist-app", "hist-app")
		Expect(revs[len(revs)-1]).To(ContainSubstring("version: v4"))
		Expect(strings.Count(strings.Join(revs, "\n---\n"), "version: v1\n")).To(Equal(2), "v1, v2, v3, v1 again, v4")
	})
})
