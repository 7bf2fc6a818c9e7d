package realnode_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/format"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// statusKinds are the kinds whose status the Rancher UI reads.
var statusKinds = map[string]string{"GitRepo": "gitrepos", "Cluster": "clusters", "ClusterGroup": "clustergroups",
	"Bundle": "bundles", "BundleDeployment": "bundledeployments"}

// contractStatusPaths reads the contract's status field paths of kind.
func contractStatusPaths(kind string) map[string]bool {
	GinkgoHelper()
	f, err := os.Open(filepath.Join(root, "..", "shared", "reference", "fleet-v1alpha1-fields.tsv"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	paths := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		cols := strings.Split(s.Text(), "\t")
		if len(cols) >= 2 && cols[0] == kind && strings.HasPrefix(cols[1], "status.") {
			paths[cols[1]] = true
		}
	}
	Expect(s.Err()).NotTo(HaveOccurred())
	return paths
}

// notApplicable reads docs/coming-from-fleet.md's table of status fields not set, with their reasons: rows
// "| Kind | `status.path` | reason |". A path stands for the fields below it too.
func notApplicable() map[string][]string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(root, "docs", "coming-from-fleet.md"))
	Expect(err).NotTo(HaveOccurred())
	row := regexp.MustCompile("(?m)^\\| (\\w+) \\| `(status\\.[^`]+)` \\| (.+) \\|$")
	out := map[string][]string{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		Expect(strings.TrimSpace(m[3])).NotTo(BeEmpty(), "a reason for %s %s", m[1], m[2])
		out[m[1]] = append(out[m[1]], m[2])
	}
	return out
}

// statusPaths adds the paths of status v (at path p) to seen, named as the contract names them:
// list items as [], map entries as {}.
func statusPaths(contract map[string]bool, p string, v any, seen map[string]bool) {
	seen[p] = true
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			switch {
			case contract[p+"."+k]:
				statusPaths(contract, p+"."+k, val, seen)
			case contract[p+"{}"]:
				statusPaths(contract, p+"{}", val, seen)
			default:
				seen[p+"."+k] = true
			}
		}
	case []any:
		for _, item := range t {
			statusPaths(contract, p+"[]", item, seen)
		}
	}
}

// recorder watches the five kinds on the manager and keeps every status path any version of any
// object showed, transient states included.
type recorder struct {
	mu   sync.Mutex
	seen map[string]map[string]bool
}

func record(ctx context.Context, dyn dynamic.Interface) *recorder {
	r := &recorder{seen: map[string]map[string]bool{}}
	for kind, resource := range statusKinds {
		contract := contractStatusPaths(kind)
		r.seen[kind] = map[string]bool{}
		w, err := dyn.Resource(schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: resource}).
			Watch(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		go func() {
			defer w.Stop()
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || ev.Type == watch.Deleted {
					continue
				}
				if st, ok := u.Object["status"]; ok {
					r.mu.Lock()
					statusPaths(contract, "status", st, r.seen[kind])
					r.mu.Unlock()
				}
			}
		}()
	}
	return r
}

// missing are the contract's status paths of kind that no object showed and docs/coming-from-fleet.md does not
// list.
func (r *recorder) missing(kind string, excluded []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p := range contractStatusPaths(kind) {
		if r.seen[kind][p] {
			continue
		}
		skip := false
		for _, e := range excluded {
			if p == e || strings.HasPrefix(p, e+".") || strings.HasPrefix(p, e+"[]") || strings.HasPrefix(p, e+"{}") {
				skip = true
			}
		}
		if !skip {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// statusRepo is the repository of the status spec: a bundle that becomes Ready (with a
// downstream resource), one whose objects are then changed, deleted and joined by an extra one
// downstream, one that cannot be applied and one whose Deployment never becomes available.
func statusRepo() map[string]string {
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  a: b\n"
	}
	files := map[string]string{
		"ready/cm.yaml": cm("sf-ready"),
		// One new BundleDeployment per pass: the other target is pending meanwhile.
		"ready/fleet.yaml": "defaultNamespace: status-fields\ndownstreamResources:\n- kind: ConfigMap\n  name: sf-source\n" +
			"rolloutStrategy:\n  maxNew: 1\n",
		"drift/fleet.yaml":  "defaultNamespace: status-fields\n",
		"broken/thing.yaml": "apiVersion: nothing.example.com/v1\nkind: NoSuchKind\nmetadata:\n  name: sf-broken\n",
		"broken/fleet.yaml": "defaultNamespace: status-fields\n",
		"slow/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: sf-slow\nspec:\n  progressDeadlineSeconds: 1\n" +
			"  selector:\n    matchLabels: {app: sf-slow}\n  template:\n    metadata:\n      labels: {app: sf-slow}\n    spec:\n" +
			"      nodeSelector: {no-such-node: \"true\"}\n      containers:\n      - name: c\n        image: registry.invalid/none:1\n",
		// One that gave up (past its progress deadline), one still trying.
		"slow/waiting.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: sf-waiting\nspec:\n" +
			"  selector:\n    matchLabels: {app: sf-waiting}\n  template:\n    metadata:\n      labels: {app: sf-waiting}\n    spec:\n" +
			"      nodeSelector: {no-such-node: \"true\"}\n      containers:\n      - name: c\n        image: registry.invalid/none:1\n",
		"slow/fleet.yaml": "defaultNamespace: status-fields\n",
	}
	drift := []string{cm("sf-drift")}
	for i := range driftGone {
		drift = append(drift, cm(fmt.Sprintf("sf-gone-%02d", i)))
	}
	files["drift/cms.yaml"] = strings.Join(drift, "---\n")
	return files
}

// driftGone is how many of drift's objects are deleted downstream: more than an agent lists.
const driftGone = 11

// publishStatusRepo writes files into the git server's repository name.
func publishStatusRepo(ctx context.Context, name string, files map[string]string) {
	GinkgoHelper()
	src := GinkgoT().TempDir()
	for f, content := range files {
		Expect(os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, f), []byte(content), 0o644)).To(Succeed())
	}
	_, err := git.Publish(ctx, name, "main", src, "status fields")
	Expect(err).NotTo(HaveOccurred())
}

func statusGitRepo(name string, paused bool, targets []fleet.GitTarget) {
	GinkgoHelper()
	_, err := fleetAPI().GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
		Spec: fleet.GitRepoSpec{Repo: git.RepoURL(name), Branch: "main", Paused: paused, ForceSyncGeneration: 1,
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second}, Targets: targets}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = fleetAPI().GitRepo().Delete(fleet.DefaultNamespace, name, nil) })
}

func gitRepoSummary(g Gomega, name string) fleet.BundleSummary {
	gr, err := fleetAPI().GitRepo().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return gr.Status.Summary
}

// fleetAPI reaches the Fleet kinds on the management cluster.
func fleetAPI() fleetcontrollers.Interface {
	GinkgoHelper()
	f, err := fleetfactory.NewFactoryFromConfig(mgmt.RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	return f.Fleet().V1alpha1()
}

// statusSpecs run within the walkthrough, once every agent is managed.
func statusSpecs() {
	Context("status the Rancher UI reads", statusContext)
}

func statusContext() {
	It("sets every status field of the contract on a rollout, or docs/coming-from-fleet.md lists it as not applicable with the reason", func(ctx context.Context) {
		dyn, err := dynamic.NewForConfig(mgmt.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		rec := record(ctx, dyn)
		prodName := strings.TrimSpace(sh(mgmt.Kubeconfig, "kubectl", "get", "clusters.fleet.cattle.io", "-n", "fleet-default", "-l", "env=prod",
			"-o", "jsonpath={.items[0].metadata.name}"))
		all := []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}
		onDev := []fleet.GitTarget{{Name: "dev", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}

		_, err = clientset(mgmt).CoreV1().ConfigMaps(fleet.DefaultNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "sf-source", Annotations: map[string]string{"fleet.cattle.io/allowed-uses": "downstreamResources"}},
			Data:       map[string]string{"from": "manager"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// prod is paused: what targets it waits to be applied there.
		setClusterPaused := func(paused bool) {
			Eventually(func() error {
				c, err := fleetAPI().Cluster().Get(fleet.DefaultNamespace, prodName, metav1.GetOptions{})
				if err != nil {
					return err
				}
				c.Spec.Paused = paused
				_, err = fleetAPI().Cluster().Update(c)
				return err
			}).Should(Succeed())
		}
		setClusterPaused(true)
		_, err = fleetAPI().ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "status-prod", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev", "prod"}}}}}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			setClusterPaused(false)
			_ = fleetAPI().ClusterGroup().Delete(fleet.DefaultNamespace, "status-prod", nil)
			_ = clientset(mgmt).CoreV1().ConfigMaps(fleet.DefaultNamespace).Delete(context.Background(), "sf-source", metav1.DeleteOptions{})
		})
		publishStatusRepo(ctx, "status-fields", statusRepo())
		statusGitRepo("status-fields", false, all)
		Eventually(func(g Gomega) {
			g.Expect(gitRepoSummary(g, "status-fields").WaitApplied).To(BeNumerically(">=", 1))
			cg, err := fleetAPI().ClusterGroup().Get(fleet.DefaultNamespace, "status-prod", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cg.Status.Summary.WaitApplied).To(BeNumerically(">=", 1))
		}).Should(Succeed())

		// A GitRepo that becomes Ready, then is paused and gets a new commit: out of sync.
		held := map[string]string{"held/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sf-held\ndata:\n  v: \"1\"\n",
			"held/fleet.yaml": "defaultNamespace: status-held\n"}
		publishStatusRepo(ctx, "status-held", held)
		statusGitRepo("status-held", false, onDev)
		// heldIn reads the clusters where status-held's object is in one state.
		heldIn := func(state func(fleet.PerClusterState) []string) func(Gomega) []string {
			return func(g Gomega) []string {
				gr, err := fleetAPI().GitRepo().Get(fleet.DefaultNamespace, "status-held", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(gr.Status.Resources).NotTo(BeEmpty())
				return state(gr.Status.Resources[0].PerClusterState)
			}
		}
		updateHeld := func(change func(*fleet.GitRepoSpec)) {
			Eventually(func() error {
				gr, err := fleetAPI().GitRepo().Get(fleet.DefaultNamespace, "status-held", metav1.GetOptions{})
				if err != nil {
					return err
				}
				change(&gr.Spec)
				_, err = fleetAPI().GitRepo().Update(gr)
				return err
			}).Should(Succeed())
		}
		Eventually(func(g Gomega) { g.Expect(gitRepoSummary(g, "status-held").Ready).To(Equal(1)) }).Should(Succeed())
		updateHeld(func(s *fleet.GitRepoSpec) { s.Paused = true })
		held["held/cm.yaml"] = strings.Replace(held["held/cm.yaml"], `"1"`, `"2"`, 1)
		publishStatusRepo(ctx, "status-held", held)
		Eventually(func(g Gomega) { g.Expect(gitRepoSummary(g, "status-held").OutOfSync).To(Equal(1)) }).Should(Succeed())
		// Paused, it gains a target: held back there, the deployment's objects are pending.
		updateHeld(func(s *fleet.GitRepoSpec) { s.Targets = all })
		Eventually(heldIn(func(s fleet.PerClusterState) []string { return s.Pending })).Should(Not(BeEmpty()))

		// prod's agent stops: once its Cluster is offline, what it deployed is in an unknown state.
		scaleAgent := func(n int32) {
			GinkgoHelper()
			sh(prod.Kubeconfig, "kubectl", "-n", "cattle-fleet-system", "scale", "deployment/fleet-agent", fmt.Sprintf("--replicas=%d", n))
		}
		scaleAgent(0)
		DeferCleanup(scaleAgent, int32(1))
		Eventually(heldIn(func(s fleet.PerClusterState) []string { return s.Unknown })).Should(Not(BeEmpty()))
		scaleAgent(1)

		// Once drift's objects are deployed on dev, one is changed, some deleted, and an object
		// of the release's set that the release does not hold appears.
		Eventually(func(g Gomega) {
			cm, err := clientset(dev).CoreV1().ConfigMaps("status-fields").Get(ctx, "sf-drift", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cm.Data).To(HaveKey("a"))
		}).Should(Succeed())
		cms := clientset(dev).CoreV1().ConfigMaps("status-fields")
		cm, err := cms.Get(ctx, "sf-drift", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sf-extra", Labels: cm.Labels, Annotations: cm.Annotations}}
		cm.Data["a"] = "changed downstream"
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cms.Create(ctx, extra, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for i := range driftGone {
			Expect(cms.Delete(ctx, fmt.Sprintf("sf-gone-%02d", i), metav1.DeleteOptions{})).To(Succeed())
		}
		Eventually(func(g Gomega) {
			s := gitRepoSummary(g, "status-fields")
			g.Expect(s.Modified).To(BeNumerically(">=", 1))
			g.Expect(s.ErrApplied).To(BeNumerically(">=", 1))
			g.Expect(s.NotReady).To(BeNumerically(">=", 1))
		}, 3*time.Minute).Should(Succeed())
		// A Cluster with every agent setting, as one registering checks in: the manager reports
		// what its agent is given (and that it does not run it yet).
		yes := true
		_, err = fleetAPI().Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "status-settings", Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{"status": "settings"}}, Spec: fleet.ClusterSpec{
			PrivateRepoURL: "mirror.example", HostNetwork: &yes,
			AgentAffinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}}}}}}}},
			AgentResources:               &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
			AgentSchedulingCustomization: &fleet.AgentSchedulingCustomization{PriorityClass: &fleet.PriorityClassSpec{Value: 100}},
		}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = fleetAPI().Cluster().Delete(fleet.DefaultNamespace, "status-settings", nil) })
		Eventually(func() error {
			c, err := fleetAPI().Cluster().Get(fleet.DefaultNamespace, "status-settings", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Status.Agent = fleet.AgentStatus{LastSeen: metav1.Now(), Namespace: "cattle-fleet-system"}
			_, err = fleetAPI().Cluster().UpdateStatus(c)
			return err
		}).Should(Succeed())

		format.MaxLength = 0
		excluded := notApplicable()
		for kind := range statusKinds {
			for _, e := range excluded[kind] {
				Expect(contractStatusPaths(kind)).To(HaveKey(e), "docs/coming-from-fleet.md lists %s %s, which the contract does not have", kind, e)
			}
		}
		Eventually(func(g Gomega) {
			var never []string
			for kind := range statusKinds {
				for _, p := range rec.missing(kind, excluded[kind]) {
					never = append(never, kind+" "+p)
				}
			}
			sort.Strings(never)
			g.Expect(strings.Join(never, "\n")).To(BeEmpty(), "status fields never set")
		}, time.Minute).Should(Succeed())
	})
}
