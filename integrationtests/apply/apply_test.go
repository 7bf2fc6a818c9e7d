package apply_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func newNamespace(ctx context.Context) string {
	cs, err := cluster.Clientset()
	Expect(err).NotTo(HaveOccurred())
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apply-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) { _ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) })
	return ns.Name
}

// repo writes files into a new folder and returns it.
func repo(files map[string]string) string {
	root := GinkgoT().TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	return root
}

func chartDir(name, version string) string {
	return repo(map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: " + name + "\nversion: " + version + "\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n",
	})
}

func run(ctx context.Context, o bundlebuild.Options) (string, error) {
	var out bytes.Buffer
	err := bundlebuild.Run(ctx, o, clients.Bundle(), &out)
	return out.String(), err
}

// countingBundles counts the Bundles read one by one.
type countingBundles struct {
	fleetcontrollers.BundleClient
	gets int
}

func (c *countingBundles) Get(ns, name string, o metav1.GetOptions) (*fleet.Bundle, error) {
	c.gets++
	return c.BundleClient.Get(ns, name, o)
}

func bundleNames(ns string) []string {
	list, err := clients.Bundle().List(ns, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	return names
}

var _ = Describe("fleet apply", func() {
	It("writes a Bundle per folder, updates them, and prunes the ones gone from the repository", func(ctx context.Context) {
		ns := newNamespace(ctx)
		root := repo(map[string]string{
			"one/fleet.yaml": "defaultNamespace: one\n",
			"one/cm.yaml":    "kind: ConfigMap\n",
			"two/fleet.yaml": "defaultNamespace: two\n",
			"two/cm.yaml":    "kind: ConfigMap\n",
		})
		o := bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "repo", Namespace: ns, Commit: "c1"}}
		_, err := run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		Expect(bundleNames(ns)).To(ConsistOf("repo-one", "repo-two"))

		// An unrelated Bundle, not labelled with this repo, must survive pruning.
		_, err = clients.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}})
		Expect(err).NotTo(HaveOccurred())

		Expect(os.RemoveAll(filepath.Join(root, "two"))).To(Succeed())
		Expect(os.WriteFile(filepath.Join(root, "one", "fleet.yaml"), []byte("defaultNamespace: changed\n"), 0o644)).To(Succeed())
		o.Commit = "c2"
		out, err := run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("repo-two deleted"))
		Expect(bundleNames(ns)).To(ConsistOf("repo-one", "other"))
		b, err := clients.Bundle().Get(ns, "repo-one", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.DefaultNamespace).To(Equal("changed"))
		Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, "c2"))
		Expect(b.Labels).To(HaveKeyWithValue(fleet.RepoLabel, "repo"))
	})

	It("reads each Bundle once per run", func(ctx context.Context) {
		ns := newNamespace(ctx)
		root := repo(map[string]string{"one/fleet.yaml": "defaultNamespace: one\n", "one/cm.yaml": "kind: ConfigMap\n",
			"two/fleet.yaml": "defaultNamespace: two\n", "two/cm.yaml": "kind: ConfigMap\n"})
		o := bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "repo", Namespace: ns, Commit: "c1"}}
		for _, commit := range []string{"c1", "c2"} { // created, then updated
			o.Commit = commit
			counted := &countingBundles{BundleClient: clients.Bundle()}
			Expect(bundlebuild.Run(ctx, o, counted, io.Discard)).To(Succeed())
			Expect(counted.gets).To(Equal(2), "commit %s", commit)
		}
		b, err := clients.Bundle().Get(ns, "repo-two", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, "c2"))
	})

	It("lists on the Bundles it writes the resources they take over from the Bundles it deletes (overwrites), as Fleet's apply does", func(ctx context.Context) {
		ns := newNamespace(ctx)
		shared := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata: {a: \"1\"}\n"
		root := repo(map[string]string{"old/fleet.yaml": "defaultNamespace: default\n", "old/cm.yaml": shared})
		o := bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "moves", Namespace: ns}}
		_, err := run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		// What the manager reports the old Bundle deployed.
		old, err := clients.Bundle().Get(ns, "moves-old", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		old.Status.ResourceKey = []fleet.ResourceKey{{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "shared"},
			{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "only-old"}}
		_, err = clients.Bundle().UpdateStatus(old)
		Expect(err).NotTo(HaveOccurred())

		// The path moves to a folder holding the same ConfigMap; a chart's folder comes too.
		Expect(os.RemoveAll(filepath.Join(root, "old"))).To(Succeed())
		for name, content := range map[string]string{
			"new/fleet.yaml": "defaultNamespace: default\n", "chart/fleet.yaml": "defaultNamespace: default\n",
			"new/cm.yaml":      shared + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new-only\n",
			"chart/Chart.yaml": "apiVersion: v2\nname: moved\nversion: 1.0.0\n", "chart/templates/cm.yaml": "{{ .Values.anything }}\n"} {
			Expect(os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755)).To(Succeed())
			Expect(os.WriteFile(filepath.Join(root, name), []byte(content), 0o644)).To(Succeed())
		}
		_, err = run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		Expect(bundleNames(ns)).To(ConsistOf("moves-new", "moves-chart"))
		moved, err := clients.Bundle().Get(ns, "moves-new", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(moved.Spec.OverwrittenResources).To(ConsistOf(fleet.OverwrittenResource{Kind: "ConfigMap", Namespace: "default", Name: "shared"}))
		chart, err := clients.Bundle().Get(ns, "moves-chart", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(chart.Spec.OverwrittenResources).To(HaveLen(2), "a chart's resources are known once rendered: the agent looks at those its release holds")
	})

	It("writes nothing and keeps existing Bundles when one folder is broken", func(ctx context.Context) {
		ns := newNamespace(ctx)
		root := repo(map[string]string{
			"good/fleet.yaml": "defaultNamespace: good\n",
			"good/cm.yaml":    "kind: ConfigMap\n",
		})
		o := bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "repo", Namespace: ns}}
		_, err := run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		before, err := clients.Bundle().Get(ns, "repo-good", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		Expect(os.WriteFile(filepath.Join(root, "good", "fleet.yaml"), []byte("defaultNamespace: changed\n"), 0o644)).To(Succeed())
		Expect(os.MkdirAll(filepath.Join(root, "bad"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(root, "bad", "fleet.yaml"), []byte("helm:\n  chartt: x\n"), 0o644)).To(Succeed())
		_, err = run(ctx, o)
		Expect(err).To(MatchError(ContainSubstring(`bad/fleet.yaml:2: key "chartt": unknown key`)))

		after, err := clients.Bundle().Get(ns, "repo-good", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "nothing may be written")
		Expect(bundleNames(ns)).To(ConsistOf("repo-good"))
	})

	It("takes over no Bundle of another GitRepo, a HelmOp or the manager with fleet.yaml name:, and writes nothing then", func(ctx context.Context) {
		ns := newNamespace(ctx)
		theirs := map[string]map[string]string{
			"other-repo-app":   {fleet.RepoLabel: "other-repo"},
			"helmop-web":       {fleet.HelmNameLabel: "web"},
			"fleet-agent-edge": {fleet.ManagedLabel: "true"},
		}
		for name, labels := range theirs {
			_, err := clients.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
				Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "x.yaml", Content: "kind: ConfigMap\n"}}}})
			Expect(err).NotTo(HaveOccurred())
		}
		for name, who := range map[string]string{"other-repo-app": "GitRepo other-repo", "helmop-web": "HelmOp web", "fleet-agent-edge": "the fleet manager"} {
			root := repo(map[string]string{
				"mine/fleet.yaml":  "defaultNamespace: mine\n",
				"mine/cm.yaml":     "kind: ConfigMap\n",
				"steal/fleet.yaml": "name: " + name + "\n",
				"steal/cm.yaml":    "kind: ConfigMap\nmetadata: {name: stolen}\n",
			})
			_, err := run(ctx, bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "repo", Namespace: ns}})
			Expect(err).To(MatchError(ContainSubstring("bundle " + ns + "/" + name + " belongs to " + who)))
			b, err := clients.Bundle().Get(ns, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(b.Spec.Resources[0].Name).To(Equal("x.yaml"), "its owner's content stays")
			_, err = clients.Bundle().Get(ns, "repo-mine", metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing of the run is written")
		}
	})

	It("embeds charts from a chart repository with basic auth, resolving the version constraint", func(ctx context.Context) {
		ns := newNamespace(ctx)
		for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
			_, err := chartRepo.AddChart(chartDir("web", v))
			Expect(err).NotTo(HaveOccurred())
		}
		root := repo(map[string]string{
			"web/fleet.yaml": "helm:\n  repo: " + chartRepo.URL + "\n  chart: web\n  version: \"~1.0\"\n",
		})
		o := bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "repo", Namespace: ns,
			ChartAuth: bundlereader.ChartAuth{Username: repoAuth.Username, Password: repoAuth.Password}}}
		// Without helmRepoURLRegex the credentials go nowhere: the repository refuses.
		_, err := run(ctx, o)
		Expect(err).To(MatchError(ContainSubstring("401")))
		o.HelmRepoURLRegex = "^" + regexp.QuoteMeta(chartRepo.URL)
		_, err = run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		b, err := clients.Bundle().Get(ns, "repo-web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.Helm.Version).To(Equal("1.0.0"))
		Expect(b.Spec.Helm.Repo).To(BeEmpty(), "agents must not need the repository")
		Expect(b.Spec.Helm.Chart).To(HavePrefix(bundlereader.EmbeddedChartDir + "/"))
		Expect(b.Spec.Resources).To(HaveLen(1))
		Expect(b.Spec.Resources[0].Name).To(Equal(b.Spec.Helm.Chart))

		o.ChartAuth.Password = "wrong"
		_, err = run(ctx, o)
		Expect(err).To(MatchError(ContainSubstring(`web/fleet.yaml: key "helm.chart"`)))
	})

	It("embeds charts from an OCI registry", func(ctx context.Context) {
		ns := newNamespace(ctx)
		pkgName, err := chartRepo.AddChart(chartDir("api", "0.3.1"))
		Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(filepath.Join(chartRepo.Dir, pkgName))
		Expect(err).NotTo(HaveOccurred())
		rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptBasicAuth(repoAuth.Username, repoAuth.Password))
		Expect(err).NotTo(HaveOccurred())
		_, err = rc.Push(data, registryHost()+"/charts/api:0.3.1")
		Expect(err).NotTo(HaveOccurred())

		root := repo(map[string]string{
			"api/fleet.yaml": "helm:\n  chart: oci://" + registryHost() + "/charts/api\n  version: \">=0.3.0\"\n",
			// As Fleet takes them: helm.repo an oci:// reference, the chart's whole reference when
			// helm.chart is empty, the repository the chart lies under when it is not.
			"whole/fleet.yaml": "helm:\n  repo: oci://" + registryHost() + "/charts/api\n  version: \">=0.3.0\"\n",
			"under/fleet.yaml": "helm:\n  repo: oci://" + registryHost() + "/charts\n  chart: api\n  version: 0.3.1\n",
		})
		o := bundlebuild.Options{Root: root, Options: bundlereader.Options{Name: "repo", Namespace: ns,
			ChartAuth: bundlereader.ChartAuth{Username: repoAuth.Username, Password: repoAuth.Password, PlainHTTP: true}},
			HelmRepoURLRegex: "^oci://" + regexp.QuoteMeta(registryHost()) + "/"}
		_, err = run(ctx, o)
		Expect(err).NotTo(HaveOccurred())
		b, err := clients.Bundle().Get(ns, "repo-api", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.Helm.Version).To(Equal("0.3.1"))
		Expect(strings.HasSuffix(b.Spec.Helm.Chart, "/api-0.3.1.tgz")).To(BeTrue(), b.Spec.Helm.Chart)
		for _, name := range []string{"repo-whole", "repo-under"} {
			b, err := clients.Bundle().Get(ns, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(b.Spec.Helm.Version).To(Equal("0.3.1"), name)
			Expect(strings.HasSuffix(b.Spec.Helm.Chart, "/api-0.3.1.tgz")).To(BeTrue(), "%s: %s", name, b.Spec.Helm.Chart)
		}
	})

	It("writes YAML with -o and needs no cluster", func(ctx context.Context) {
		root := repo(map[string]string{"cm.yaml": "kind: ConfigMap\n"})
		dest := filepath.Join(GinkgoT().TempDir(), "out.yaml")
		err := bundlebuild.Run(ctx, bundlebuild.Options{Root: root, Output: dest, Options: bundlereader.Options{Name: "offline", Namespace: "fleet-local"}}, nil, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		data, err := os.ReadFile(dest)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(ContainSubstring("name: offline"))
		Expect(string(data)).NotTo(ContainSubstring("status:"))
	})
})

func registryHost() string { return ociReg.Host }
