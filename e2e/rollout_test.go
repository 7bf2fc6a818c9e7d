package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The rollout repository: one chart, a ConfigMap naming the version and a Deployment. The
// management cluster (stage "rest") runs no pods, so it gets no replicas.
const (
	rolloutRepo = "rollout-demo"
	// rolloutRepoPath is its path on the git server: owner and name, as a forge has them.
	rolloutRepoPath = "team/" + rolloutRepo
	rolloutNS       = "rollout-demo"
	rolloutChart    = `apiVersion: v2
name: web
version: 0.1.0
`
	rolloutFleetYAML = `defaultNamespace: rollout-demo
helm:
  releaseName: web
targetCustomizations:
- name: management
  clusterName: local
  helm:
    values:
      replicas: 0
`
	rolloutTemplates = `apiVersion: v1
kind: ConfigMap
metadata:
  name: version
data:
  version: {{ .Values.version | quote }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {{ .Values.replicas }}
  strategy:
    type: Recreate
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      {{- with .Values.nodeSelector }}
      nodeSelector: {{ toJson . }}
      {{- end }}
      containers:
      - name: web
        image: registry.invalid/web:{{ .Values.version }}
`
)

// publishRollout commits the chart with its values: version, and a nodeSelector (a workload
// that never becomes available when no node has it).
func publishRollout(ctx context.Context, version, nodeSelector string) string {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	files := map[string]string{
		"app/Chart.yaml":               rolloutChart,
		"app/fleet.yaml":               rolloutFleetYAML,
		"app/templates/manifests.yaml": rolloutTemplates,
		"app/values.yaml":              fmt.Sprintf("version: %s\nreplicas: 1\nnodeSelector: %s\n", version, nodeSelector),
	}
	for path, content := range files {
		Expect(os.MkdirAll(filepath.Join(dir, filepath.Dir(path)), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, path), []byte(content), 0o644)).To(Succeed())
	}
	commit, err := git.Publish(ctx, rolloutRepoPath, "main", dir, version)
	Expect(err).NotTo(HaveOccurred())
	return commit
}

// versionOn is the version the cluster's ConfigMap says ("" when there is none).
func versionOn(kube kubernetes.Interface) func() string {
	return func() string {
		cm, err := kube.CoreV1().ConfigMaps(rolloutNS).Get(context.Background(), "version", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return cm.Data["version"]
	}
}

func rolloutStatus() fleet.RolloutStatus {
	rs, err := api.Rollout().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: fleet.RepoLabel + "=" + rolloutRepo})
	Expect(err).NotTo(HaveOccurred())
	if len(rs.Items) != 1 {
		return fleet.RolloutStatus{}
	}
	return rs.Items[0].Status
}

var _ = Describe("a progressive rollout in three stages (canary, one, the rest)", Ordered, func() {
	var health string
	// notes receive the Alerts' messages and the commit checks.
	var notes *endpoints

	BeforeAll(func(ctx context.Context) {
		// The "web" health check the agents make from inside their clusters: unhealthy while
		// dev runs the version "bad-http".
		l, err := net.Listen("tcp", "0.0.0.0:0")
		Expect(err).NotTo(HaveOccurred())
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if versionOn(dev.kube)() == "bad-http" {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(l) }()
		DeferCleanup(srv.Close)
		health = fmt.Sprintf("http://%s:%d/healthz", netns.HostIP, l.Addr().(*net.TCPAddr).Port)

		notes = newEndpoints()
		notes.alertOn(rolloutRepo)

		soak := &metav1.Duration{Duration: 5 * time.Second}
		_, err = api.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "three-stages", Namespace: fleet.DefaultNamespace},
			Spec: fleet.RolloutPolicySpec{
				Stages: []fleet.RolloutStage{{Name: "canary", ClusterName: dev.name, Soak: soak},
					{Name: "second", ClusterName: prod.name, Soak: soak, RequireApproval: true}, {Name: "rest"}},
				Gates: []fleet.HealthGate{{Name: "web", HTTPGet: &fleet.HTTPGate{URL: health}, FailureThreshold: 1,
					Interval: &metav1.Duration{Duration: 2 * time.Second}}},
				ProgressDeadline: &metav1.Duration{Duration: 30 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())
		// The rest: the management cluster, in fleet-local.
		_, err = api.BundleNamespaceMapping().Create(&fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Name: "rollout-demo-local", Namespace: fleet.DefaultNamespace},
			BundleSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{fleet.RepoLabel: rolloutRepo}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fleet.LocalNamespace}}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			removeGitRepo(fleet.DefaultNamespace, rolloutRepo)
			_ = api.BundleNamespaceMapping().Delete(fleet.DefaultNamespace, "rollout-demo-local", &metav1.DeleteOptions{})
			_ = api.RolloutPolicy().Delete(fleet.DefaultNamespace, "three-stages", &metav1.DeleteOptions{})
		})
	})

	It("passes a good commit through every stage after its soak, holding the second stage until `fleet rollout approve`", func(ctx context.Context) {
		v1 := publishRollout(ctx, "v1", "{}")
		_, err := api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: rolloutRepo, Namespace: fleet.DefaultNamespace,
			Annotations: map[string]string{fleet.RolloutPolicyAnnotation: "three-stages"}},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL(rolloutRepoPath), Branch: "main", ClientSecretName: "git-auth", Paths: []string{"app"},
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
				Targets:         []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(versionOn(dev.kube), 2*time.Minute).Should(Equal("v1"))
		Expect(versionOn(prod.kube)()).To(BeEmpty(), "the canary first")
		Eventually(func() string { return rolloutStatus().Phase }, time.Minute).Should(Equal(fleet.RolloutWaitingForApproval))
		Consistently(versionOn(prod.kube), 3*time.Second).Should(BeEmpty(), "the second stage waits for its approval")
		Expect(fleetCmd("rollout", "status", rolloutRepo, "--kubeconfig", manager.Kubeconfig)).To(ContainSubstring("stage second waits for approval"))

		Expect(fleetCmd("rollout", "approve", rolloutRepo, "--kubeconfig", manager.Kubeconfig)).To(ContainSubstring("approved stage second"))
		Eventually(versionOn(prod.kube), time.Minute).Should(Equal("v1"))
		Eventually(versionOn(managerKube), time.Minute).Should(Equal("v1"), "the rest after the second stage's soak")
		Eventually(func() string { return rolloutStatus().Phase }, time.Minute).Should(Equal(fleet.RolloutComplete))
		Eventually(replicas(dev, rolloutNS, "web")).Should(Equal(int32(1)))
		Expect(fleetCmd("status", "--kubeconfig", manager.Kubeconfig, rolloutRepo)).To(MatchRegexp(`rollout \(three-stages\) Complete: canary 1/1 Complete, second 1/1 Complete, rest 1/1 Complete`))
		// The commit's check: pending while it rolled out, success once complete; the last message says so.
		Eventually(notes.statusesOf(v1), time.Minute).Should(Equal([]string{"pending", "success"}))
		Eventually(notes.since(0), time.Minute).Should(ContainElement(HavePrefix("Complete: " + rolloutRepo + "-app revision")))
	})

	It("rolls the canary back when the new workload never becomes available; no other cluster gets it", func(ctx context.Context) {
		before := notes.count()
		v2 := publishRollout(ctx, "v2", "{no-such-node: \"true\"}")
		Eventually(versionOn(dev.kube), time.Minute).Should(Equal("v2"))
		Eventually(func() string { return rolloutStatus().Phase }, 2*time.Minute).Should(Equal(fleet.RolloutRolledBack))
		// One message per transition, the failure's in the last; the commit's check fails.
		bundle := notes.about(rolloutRepo+"-app revision", before)
		Eventually(bundle, time.Minute).Should(HaveExactElements(HavePrefix("Started: "),
			And(HavePrefix("Halted: "), ContainSubstring("halted at stage canary"), ContainSubstring("cluster "+dev.name+" failed gate Ready")),
			HavePrefix("RolledBack: ")))
		Consistently(bundle, "3s").Should(HaveLen(3))
		Eventually(notes.statusesOf(v2), time.Minute).Should(Equal([]string{"pending", "failure"}))
		st := rolloutStatus()
		Expect(st.Failures).To(HaveLen(1))
		Expect(st.Failures[0].Cluster).To(Equal(dev.name))
		Expect(st.Failures[0].Gate).To(Equal("Ready"))
		Eventually(versionOn(dev.kube), time.Minute).Should(Equal("v1"), "the canary is back on the previous revision")
		Eventually(replicas(dev, rolloutNS, "web"), time.Minute).Should(Equal(int32(1)), "its workload serves again")
		Expect(versionOn(prod.kube)()).To(Equal("v1"))
		Expect(versionOn(managerKube)()).To(Equal("v1"))
		Expect(fleetCmd("rollout", "status", rolloutRepo, "--kubeconfig", manager.Kubeconfig)).To(ContainSubstring("failed: cluster " + dev.name + ", gate Ready"))
	})

	It("rolls the canary back when its HTTP check fails; no other cluster gets it", func(ctx context.Context) {
		publishRollout(ctx, "bad-http", "{}")
		Eventually(versionOn(dev.kube), time.Minute).Should(Equal("bad-http"))
		Eventually(func() string { return rolloutStatus().Phase }, 2*time.Minute).Should(Equal(fleet.RolloutRolledBack))
		st := rolloutStatus()
		Expect(st.Failures).To(HaveLen(1))
		Expect(st.Failures[0].Gate).To(Equal("web"))
		Expect(st.Failures[0].Reason).To(Equal("GET " + health + ": status 500"))
		Eventually(versionOn(dev.kube), time.Minute).Should(Equal("v1"))
		Expect(versionOn(prod.kube)()).To(Equal("v1"))
		// The GitRepo's Bundle says which cluster failed which gate, and so do its events.
		b, err := api.Bundle().Get(fleet.DefaultNamespace, rolloutRepo+"-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionRollout)
		Expect(c).NotTo(BeNil())
		Expect(c.Message).To(ContainSubstring("cluster " + dev.name + " failed gate web: GET " + health + ": status 500"))
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, rolloutRepo, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionRollout)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring("failed gate web"))
			events, err := managerKube.CoreV1().Events(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=RolloutHalted"})
			g.Expect(err).NotTo(HaveOccurred())
			var msgs []string
			for _, e := range events.Items {
				msgs = append(msgs, e.InvolvedObject.Kind+": "+e.Message)
			}
			g.Expect(msgs).To(ContainElement(ContainSubstring("GitRepo: bundle " + rolloutRepo + "-app: halted in stage canary")))
			g.Expect(msgs).To(ContainElement(MatchRegexp("Bundle: halted in stage canary.*failed gate web")))
		}, time.Minute).Should(Succeed())
	})

	It("starts a new rollout with the next commit", func(ctx context.Context) {
		publishRollout(ctx, "v4", "{}")
		Eventually(versionOn(dev.kube), time.Minute).Should(Equal("v4"))
		Eventually(func() string { return rolloutStatus().Phase }, time.Minute).Should(Equal(fleet.RolloutWaitingForApproval))
		Expect(fleetCmd("rollout", "approve", rolloutRepo, "--kubeconfig", manager.Kubeconfig)).To(ContainSubstring("approved stage second"))
		Eventually(versionOn(managerKube), 2*time.Minute).Should(Equal("v4"))
		Eventually(func() string { return rolloutStatus().Phase }, time.Minute).Should(Equal(fleet.RolloutComplete))
		Expect(strings.Join([]string{versionOn(dev.kube)(), versionOn(prod.kube)()}, ",")).To(Equal("v4,v4"))
	})
})
