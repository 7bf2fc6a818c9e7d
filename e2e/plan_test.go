package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The plan repository: a chart whose values are templated per cluster and customized for the
// env=prod clusters, and a kustomize bundle with an overlay for env=dev.
func planRepo(version string) map[string]string {
	return map[string]string{
		"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"app/fleet.yaml": `defaultNamespace: plan-app
helm:
  values:
    cluster: ${ .ClusterName }
    greeting: ` + version + `
targetCustomizations:
- name: prod
  clusterSelector:
    matchLabels: {env: prod}
  helm:
    values:
      replicas: 3
`,
		"app/values.yaml": "replicas: 1\n",
		"app/templates/settings.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-settings
data:
  cluster: {{ .Values.cluster | quote }}
  greeting: {{ .Values.greeting | quote }}
  replicas: {{ .Values.replicas | quote }}
`,
		"ops/fleet.yaml": `defaultNamespace: plan-ops
kustomize:
  dir: overlays/default
targetCustomizations:
- name: dev
  clusterSelector:
    matchLabels: {env: dev}
  kustomize:
    dir: overlays/dev
`,
		"ops/base/kustomization.yaml":             "resources:\n- settings.yaml\n",
		"ops/base/settings.yaml":                  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ops-settings\ndata:\n  level: info\n  version: " + version + "\n",
		"ops/overlays/default/kustomization.yaml": "resources:\n- ../../base\n",
		"ops/overlays/dev/kustomization.yaml": "resources:\n- ../../base\npatches:\n- patch: |-\n    apiVersion: v1\n    kind: ConfigMap\n" +
			"    metadata:\n      name: ops-settings\n    data:\n      level: debug-" + version + "\n",
	}
}

// writeTree replaces dir's files (but .git) with files.
func writeTree(dir string, files map[string]string) {
	GinkgoHelper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != ".git" {
			Expect(os.RemoveAll(filepath.Join(dir, e.Name()))).To(Succeed())
		}
	}
	for path, content := range files {
		Expect(os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644)).To(Succeed())
	}
}

// localCommit commits the working tree of a local repository.
func localCommit(repo *gogit.Repository, msg string) string {
	GinkgoHelper()
	wt, err := repo.Worktree()
	Expect(err).NotTo(HaveOccurred())
	Expect(wt.AddWithOptions(&gogit.AddOptions{All: true})).To(Succeed())
	h, err := wt.Commit(msg, &gogit.CommitOptions{All: true, Author: &object.Signature{Name: "e2e", Email: "e2e@example.com", When: time.Now()}})
	Expect(err).NotTo(HaveOccurred())
	return h.String()
}

// toAllThree creates GitRepo name over paths of the git server's repository of that name,
// polled every 2 s, targeting every cluster: both downstream ones, and (through a
// BundleNamespaceMapping) the management cluster's own. The spec's cleanup removes both.
func toAllThree(name string, paths ...string) {
	GinkgoHelper()
	_, err := api.BundleNamespaceMapping().Create(&fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Name: name + "-local", Namespace: fleet.DefaultNamespace},
		BundleSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{fleet.RepoLabel: name}},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fleet.LocalNamespace}}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		removeGitRepo(fleet.DefaultNamespace, name)
		_ = api.BundleNamespaceMapping().Delete(fleet.DefaultNamespace, name+"-local", &metav1.DeleteOptions{})
	})
	_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
		Spec: fleet.GitRepoSpec{Repo: git.RepoURL(name), Branch: "main", ClientSecretName: "git-auth", Paths: paths,
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
			Targets:         []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}}})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("fleet plan", Ordered, func() {
	It("predicts, for three clusters, byte for byte what their agents deploy once the GitRepo moves to head", func(ctx context.Context) {
		// The pull request: base and head commits in a local checkout; the git server gets the
		// same trees as the GitRepo's branch.
		local := GinkgoT().TempDir()
		repo, err := gogit.PlainInit(local, false)
		Expect(err).NotTo(HaveOccurred())
		writeTree(local, planRepo("v1"))
		base := localCommit(repo, "base")
		serverTree := GinkgoT().TempDir()
		writeTree(serverTree, planRepo("v1"))
		_, err = git.Publish(ctx, "plan-demo", "main", serverTree, "base")
		Expect(err).NotTo(HaveOccurred())

		toAllThree("plan-demo", "app", "ops")
		Eventually(func() string {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "plan-demo", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return gr.Status.Display.ReadyBundleDeployments
		}, 3*time.Minute).Should(Equal("6/6"))

		writeTree(local, planRepo("v2"))
		head := localCommit(repo, "the change")
		manifests := GinkgoT().TempDir()
		text := fleetCmd("plan", "--kubeconfig", manager.Kubeconfig, "--repo", local, "--base", base, "--head", head,
			"--gitrepo", "plan-demo", "--manifests", manifests)
		fmt.Fprintf(GinkgoWriter, "fleet plan:\n%s", text)
		Expect(text).To(ContainSubstring("bundle plan-demo-app: 3 changed"))
		Expect(text).To(ContainSubstring("bundle plan-demo-ops: 3 changed"))

		writeTree(serverTree, planRepo("v2"))
		commit, err := git.Publish(ctx, "plan-demo", "main", serverTree, "the change")
		Expect(err).NotTo(HaveOccurred())
		expectGitRepoReady(fleet.DefaultNamespace, "plan-demo", commit, "6/6")

		type target struct {
			cfg       *rest.Config
			namespace string // the cluster's namespace on the manager
			name      string
			agentNS   string
		}
		targets := []target{{dev.RESTConfig(), fleet.DefaultNamespace, dev.name, fleet.SystemNamespace},
			{prod.RESTConfig(), fleet.DefaultNamespace, prod.name, fleet.SystemNamespace},
			{manager.RESTConfig(), fleet.LocalNamespace, bootstrap.LocalClusterName, bootstrap.LocalAgentNamespace}}
		for _, t := range targets {
			c, err := api.Cluster().Get(t.namespace, t.name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			dep, err := helmdeployer.New(t.cfg, t.agentNS)
			Expect(err).NotTo(HaveOccurred())
			for _, bundle := range []string{"plan-demo-app", "plan-demo-ops"} {
				bd, err := api.BundleDeployment().Get(c.Status.Namespace, bundle, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				rel, err := dep.Current(ctx, bd.Name, &bd.Spec.Options)
				Expect(err).NotTo(HaveOccurred())
				Expect(rel).NotTo(BeNil())
				predicted, err := os.ReadFile(filepath.Join(manifests, bundle, t.namespace+"_"+t.name+".yaml"))
				Expect(err).NotTo(HaveOccurred(), "fleet plan predicted nothing for %s on %s", bundle, t.name)
				Expect(rel.Manifest).To(Equal(string(predicted)), "%s on cluster %s", bundle, t.name)
				Expect(strings.Contains(rel.Manifest, "v2")).To(BeTrue())
			}
		}
	})
})
