package gitrepo_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/controller"
	"github.com/fleetgo/fleet/pkg/localcluster"
)

// podRunner stands in for a kubelet: it runs each Pod the Job controller creates with the real
// fleet binary, as the Pod says (command, args, env, Secrets and ConfigMaps mounted as files,
// the Pod's ServiceAccount as its identity), and reports how its containers ended.
type podRunner struct {
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	bin     string
	mu      sync.Mutex
	seen    map[string]bool
}

func (r *podRunner) loop(ctx context.Context, ns string) {
	defer GinkgoRecover()
	for ctx.Err() == nil {
		pods, err := r.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name"})
		if err == nil {
			for _, p := range pods.Items {
				r.mu.Lock()
				done := r.seen[p.Name]
				r.seen[p.Name] = true
				r.mu.Unlock()
				if !done && p.Status.Phase == corev1.PodPending {
					go r.run(ctx, p.DeepCopy())
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func (r *podRunner) run(ctx context.Context, p *corev1.Pod) {
	defer GinkgoRecover()
	root, err := os.MkdirTemp("", "pod-"+p.Name+"-")
	Expect(err).NotTo(HaveOccurred())
	defer os.RemoveAll(root)
	vols := map[string]string{}
	for _, v := range p.Spec.Volumes {
		dir := filepath.Join(root, "volumes", v.Name)
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		vols[v.Name] = dir
		data := map[string][]byte{}
		switch {
		case v.ConfigMap != nil:
			cm, err := r.kube.CoreV1().ConfigMaps(p.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
		case v.Secret != nil:
			s, err := r.kube.CoreV1().Secrets(p.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			data = s.Data
		}
		for k, b := range data {
			Expect(os.WriteFile(filepath.Join(dir, k), b, 0o600)).To(Succeed())
		}
	}
	// The Pod's identity: a token of its ServiceAccount.
	tr, err := r.kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	cfg := r.cluster.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa"}
	kc.CurrentContext = "c"
	kubeconfig := filepath.Join(root, "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, kubeconfig)).To(Succeed())

	status := p.Status.DeepCopy()
	status.Phase = corev1.PodSucceeded
	exec1 := func(c corev1.Container) corev1.ContainerStatus {
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				s, err := r.kube.CoreV1().Secrets(p.Namespace).Get(ctx, e.ValueFrom.SecretKeyRef.Name, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				env[e.Name] = string(s.Data[e.ValueFrom.SecretKeyRef.Key])
			} else {
				env[e.Name] = e.Value
			}
		}
		mounts := c.VolumeMounts
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].MountPath) > len(mounts[j].MountPath) })
		var args []string
		for _, a := range append(c.Command[1:], c.Args...) {
			a = envRef.ReplaceAllStringFunc(a, func(m string) string { return env[envRef.FindStringSubmatch(m)[1]] })
			for _, m := range mounts {
				if strings.HasPrefix(a, m.MountPath) {
					a = vols[m.Name] + strings.TrimPrefix(a, m.MountPath)
					break
				}
			}
			args = append(args, a)
		}
		cmd := exec.CommandContext(ctx, r.bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HOME="+root)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		GinkgoWriter.Printf("pod %s, container %s: %v\n%s\n", p.Name, c.Name, args, out)
		code := int32(0)
		if err != nil {
			code = 1
		}
		msg := string(out)
		if len(msg) > 2048 {
			msg = msg[len(msg)-2048:]
		}
		return corev1.ContainerStatus{Name: c.Name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Message: msg, Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0]}}}
	}
	failed := false
	for _, c := range p.Spec.InitContainers {
		s := exec1(c)
		status.InitContainerStatuses = append(status.InitContainerStatuses, s)
		if s.State.Terminated.ExitCode != 0 {
			failed = true
			break
		}
	}
	if !failed {
		for _, c := range p.Spec.Containers {
			s := exec1(c)
			status.ContainerStatuses = append(status.ContainerStatuses, s)
			failed = failed || s.State.Terminated.ExitCode != 0
		}
	}
	if failed {
		status.Phase = corev1.PodFailed
	}
	cur, err := r.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	cur.Status = *status
	_, err = r.kube.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("GitRepo as Jobs", Ordered, func() {
	var jm *localcluster.Cluster
	It("clones and applies in a Job whose pod runs fleet gitcloner and fleet apply as the GitRepo's ServiceAccount; a failing pod stalls the GitRepo with its message", func(ctx context.Context) {
		cluster, fapi, err := testenv.StartWithCRDsOptions(ctx, localcluster.Options{Name: "jobs", Tier: localcluster.Controllers})
		Expect(err).NotTo(HaveOccurred())
		jm = cluster
		DeferCleanup(cluster.Stop)
		k, err := cluster.Clientset()
		Expect(err).NotTo(HaveOccurred())
		bin, err := gexec.Build("github.com/fleetgo/fleet")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)

		runCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go func() {
			defer GinkgoRecover()
			Expect(controller.Run(runCtx, cluster.RESTConfig(), controller.Options{SystemNamespace: "cattle-fleet-system", Workers: 4,
				GitJobImage: "fleet:test"})).To(Succeed())
		}()
		r := &podRunner{cluster: jm, kube: k, bin: bin, seen: map[string]bool{}}
		go r.loop(runCtx, fleet.DefaultNamespace)

		Eventually(func() error {
			_, err := k.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: credentials, Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeBasicAuth,
				StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: gitPassword}}, metav1.CreateOptions{})
			return err
		}).Should(Succeed())
		commit := publish("jobs", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		_, err = fapi.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "jobs", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("jobs"), Branch: "main", ClientSecretName: credentials,
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
				Targets:         []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "job"}}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			b, err := fapi.Bundle().Get(fleet.DefaultNamespace, "jobs-app", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit))
			g.Expect(b.Spec.Targets[len(b.Spec.Targets)-1].ClusterSelector.MatchLabels).To(HaveKeyWithValue("env", "job"), "targets reach the Job through its ConfigMap")
			gr, err := fapi.GitRepo().Get(fleet.DefaultNamespace, "jobs", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit))
			g.Expect(gr.Status.GitJobStatus).To(Equal("Current"))
		}, 90*time.Second).Should(Succeed())

		publish("jobs", "main", map[string]string{"app/cm.yaml": configMap("app", "2"), "app/fleet.yaml": "helm:\n  values: [broken\n"})
		Eventually(func(g Gomega) {
			gr, err := fapi.GitRepo().Get(fleet.DefaultNamespace, "jobs", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.GitJobStatus).To(Equal("Failed"))
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("container fleet"))
			g.Expect(c.Message).To(ContainSubstring("app/fleet.yaml"))
		}, 90*time.Second).Should(Succeed())
		b, err := fapi.Bundle().Get(fleet.DefaultNamespace, "jobs-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit), "the failed commit changed no Bundle")
		jobs, err := k.BatchV1().Jobs(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		live := 0
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				live++
			}
		}
		Expect(live).To(Equal(1), "the newer commit's Job replaced the older one")
	}, NodeTimeout(5*time.Minute))
})
