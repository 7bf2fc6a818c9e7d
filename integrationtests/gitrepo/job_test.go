package gitrepo_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

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
		r := &testenv.PodRunner{Config: jm.RESTConfig(), Kube: k, Binary: bin, Log: GinkgoWriter}
		go r.Run(runCtx, fleet.DefaultNamespace)

		Eventually(func() error {
			_, err := k.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: credentials, Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeBasicAuth,
				StringData: map[string]string{corev1.BasicAuthUsernameKey: gitUser, corev1.BasicAuthPasswordKey: gitPassword}}, metav1.CreateOptions{})
			return err
		}).Should(Succeed())
		commit := publish("jobs", "main", map[string]string{"app/cm.yaml": configMap("app", "1"), "app/fleet.yaml": "helm:\n  values:\n    greeting: hello\n"})
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

		// The Job kept the Helm values in the Bundle's values Secret, with its own token.
		b, err := fapi.Bundle().Get(fleet.DefaultNamespace, "jobs-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Spec.ValuesHash).NotTo(BeEmpty())
		Expect(b.Spec.Helm == nil || b.Spec.Helm.Values == nil).To(BeTrue(), "no values in the Bundle")
		values, err := k.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, "jobs-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(values.Data["values.yaml"]).To(MatchJSON(`{"greeting":"hello"}`))

		// The Job is bounded in time and requests resources; its ServiceAccount may write the
		// namespace's Bundles and values Secrets and nothing else (no other Secrets, events or
		// GitRepos).
		jobs, err := k.BatchV1().Jobs(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: fleet.RepoLabel + "=jobs"})
		Expect(err).NotTo(HaveOccurred())
		Expect(jobs.Items).NotTo(BeEmpty())
		job := jobs.Items[0]
		Expect(job.Spec.ActiveDeadlineSeconds).NotTo(BeNil())
		Expect(*job.Spec.ActiveDeadlineSeconds).To(BeNumerically(">", 0))
		pod := job.Spec.Template.Spec
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			Expect(c.Resources.Requests.Cpu().IsZero()).To(BeFalse(), "container %s requests CPU", c.Name)
			Expect(c.Resources.Requests.Memory().IsZero()).To(BeFalse(), "container %s requests memory", c.Name)
			// Pod Security "restricted", with a read-only root filesystem.
			sc := c.SecurityContext
			Expect(sc).NotTo(BeNil(), c.Name)
			Expect(*sc.AllowPrivilegeEscalation).To(BeFalse(), c.Name)
			Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue(), c.Name)
			Expect(*sc.RunAsNonRoot).To(BeTrue(), c.Name)
			Expect(sc.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), c.Name)
			Expect(sc.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault), c.Name)
			Expect(c.VolumeMounts).To(ContainElement(HaveField("MountPath", "/tmp")), "a writable /tmp for %s", c.Name)
		}
		Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		// The ServiceAccount's token: not automounted; a short-lived one in the apply step only.
		Expect(pod.AutomountServiceAccountToken).NotTo(BeNil())
		Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
		tokenMount := HaveField("MountPath", "/var/run/secrets/kubernetes.io/serviceaccount")
		Expect(pod.InitContainers[0].VolumeMounts).NotTo(ContainElement(tokenMount), "the clone step gets no token")
		Expect(pod.Containers[0].VolumeMounts).To(ContainElement(tokenMount))
		var lifetime int64
		for _, v := range pod.Volumes {
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.ServiceAccountToken != nil {
						lifetime = *src.ServiceAccountToken.ExpirationSeconds
					}
				}
			}
		}
		Expect(lifetime).To(BeNumerically("<=", 3600), "the apply step's token is short-lived")
		Expect(lifetime).To(BeNumerically(">=", 600))
		role, err := k.RbacV1().Roles(fleet.DefaultNamespace).Get(ctx, job.Spec.Template.Spec.ServiceAccountName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"bundles", "imagescans"},
			Verbs: []string{"get", "list", "create", "update", "delete"}},
			{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"gitrepos"}, ResourceNames: []string{"jobs"}, Verbs: []string{"publish"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "update", "delete", "write-bundle-values"}}}))

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
		b, err = fapi.Bundle().Get(fleet.DefaultNamespace, "jobs-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit), "the failed commit changed no Bundle")
		jobs, err = k.BatchV1().Jobs(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		live, liveName := 0, ""
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				live, liveName = live+1, j.Name
			}
		}
		Expect(live).To(Equal(1), "the newer commit's Job replaced the older one")
		Eventually(func(g Gomega) {
			cms, err := k.CoreV1().ConfigMaps(fleet.DefaultNamespace).List(ctx, metav1.ListOptions{LabelSelector: fleet.RepoLabel + "=jobs"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cms.Items).To(HaveLen(1), "and its ConfigMap the older one's")
			g.Expect(cms.Items[0].Name).To(Equal(liveName + "-config"))
		}).Should(Succeed())
	}, NodeTimeout(5*time.Minute))
})
