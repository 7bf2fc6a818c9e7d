package migration_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// workloadsUntouched: the release's objects and Pods are the ones Fleet made.
func workloadsUntouched(ctx context.Context, g Gomega, d *downstream) {
	dep, err := d.kube.AppsV1().Deployments(appNamespace).Get(ctx, "app", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dep.UID).To(Equal(d.deploymentUID), "%s: Deployment recreated", d.env)
	cm, err := d.kube.CoreV1().ConfigMaps(appNamespace).Get(ctx, "app-settings", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.UID).To(Equal(d.configMapUID), "%s: ConfigMap recreated", d.env)
	g.Expect(podUIDs(ctx, g, d)).To(ConsistOf(d.podUIDs), "%s: Pods replaced", d.env)
}

func bundleDeployment(g Gomega, d *downstream) *fleet.BundleDeployment {
	bd, err := api.BundleDeployment().Get(d.clusterNS, bundleName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return bd
}

var _ = Describe("moving a Fleet installation", Ordered, func() {
	It("starts this project's agents on Fleet's credentials: no registration, nothing redeployed while Fleet's deployments stand", func(ctx context.Context) {
		for _, d := range downstreams {
			start("agent-"+d.env, "agent", "--kubeconfig", d.Kubeconfig, "--leader-elect=false", "--health-addr=", "--metrics-addr=",
				"--checkin-interval=2s", "--debug")
		}
		for _, d := range downstreams {
			// It checks in as the Cluster Fleet registered, through the identity Fleet gave it.
			Eventually(func(g Gomega) {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, d.name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Status.Agent.LastSeen.Time).To(BeTemporally(">", d.fleetLastSeen))
			}).Should(Succeed(), d.env)
			// It looked at its BundleDeployment and left Fleet's release alone: applied is what
			// Fleet's manager asked for.
			Eventually(func(g Gomega) {
				bd := bundleDeployment(g, d)
				g.Expect(bd.Status.AppliedDeploymentID).To(Equal(d.fleetDeploymentID))
				g.Expect(bd.Status.Release).To(Equal(appNamespace + "/" + bundleName + ":1"))
				g.Expect(fleet.FindCondition(bd.Status.Conditions, "Monitored")).NotTo(BeNil())
				g.Expect(releaseRevisions(ctx, g, d)).To(ConsistOf("1=deployed"))
				workloadsUntouched(ctx, g, d)
				// Adopted: labelled as this agent labels its releases, for its garbage collection.
				adopted, err := d.kube.CoreV1().Secrets(appNamespace).List(ctx, metav1.ListOptions{
					LabelSelector: "owner=helm,version=1,fleet.cattle.io/bundle-id=" + bundleName + ",fleet.cattle.io/agent-namespace=" + fleet.SystemNamespace})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(adopted.Items).To(HaveLen(1))
				// The values bundle too, whose values Fleet kept in Secrets.
				vbd, err := api.BundleDeployment().Get(d.clusterNS, valuesBundle, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(vbd.Status.Release).To(Equal(valuesNamespace + "/" + valuesBundle + ":1"))
				g.Expect(valuesRevisions(ctx, g, d)).To(ConsistOf("1=deployed"))
				valuesKept(ctx, g, d)
			}).Should(Succeed(), d.env)
		}
		regs, err := api.ClusterRegistration().List(fleet.DefaultNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(regs.Items).To(BeEmpty())
	})

	It("starts this project's manager: it takes the deployments over with one upgrade each, the Pods stay, the GitRepo is Ready", func(ctx context.Context) {
		start("controller", "controller", "--kubeconfig", manager.Kubeconfig, "--leader-elect=false", "--health-addr=",
			"--metrics-addr=", "--webhook-addr=", "--workers=4")
		for _, d := range downstreams {
			Eventually(func(g Gomega) {
				bd := bundleDeployment(g, d)
				g.Expect(bd.Spec.DeploymentID).NotTo(Equal(d.fleetDeploymentID), "the manager computes its own deploymentIDs")
				g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID))
				g.Expect(bd.Status.Release).To(Equal(appNamespace + "/" + bundleName + ":2"))
				g.Expect(bd.Status.Ready).To(BeTrue())
				// Upgraded with the values Fleet kept in Secrets and those of valuesFrom, not the
				// chart's defaults.
				vbd, err := api.BundleDeployment().Get(d.clusterNS, valuesBundle, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(vbd.Status.AppliedDeploymentID).To(Equal(vbd.Spec.DeploymentID))
				g.Expect(vbd.Status.Release).To(Equal(valuesNamespace + "/" + valuesBundle + ":2"))
				g.Expect(vbd.Status.Ready).To(BeTrue())
			}, 3*time.Minute).Should(Succeed(), d.env)
		}
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, gitRepoName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(commit))
			g.Expect(gr.Status.Display.ReadyBundleDeployments).To(Equal("4/4"))
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue), c.Message)
		}, 2*time.Minute).Should(Succeed())

		// Nothing happens after that: one upgrade, the same objects and Pods.
		Consistently(func(g Gomega) {
			for _, d := range downstreams {
				g.Expect(releaseRevisions(ctx, g, d)).To(ConsistOf("1=superseded", "2=deployed"), d.env)
				workloadsUntouched(ctx, g, d)
				g.Expect(valuesRevisions(ctx, g, d)).To(ConsistOf("1=superseded", "2=deployed"), d.env)
				valuesKept(ctx, g, d)
			}
		}, 6*time.Second, time.Second).Should(Succeed())
	})

	It("keeps every Cluster and agent identity: no registration, and each agent traded Fleet's token for an expiring one", func(ctx context.Context) {
		clusters, err := api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(clusters.Items).To(HaveLen(len(downstreams)))
		for _, d := range downstreams {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, d.name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(c.UID).To(Equal(d.clusterUID))
			Eventually(func(g Gomega) {
				s, err := d.kube.CoreV1().Secrets(fleet.SystemNamespace).Get(ctx, registration.AgentSecret, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(s.UID).To(Equal(d.agentSecretUID))
				g.Expect(string(s.Data[registration.KeyServiceAccount])).To(Equal(registration.AgentServiceAccount(d.clusterNS)))
				g.Expect(string(s.Data[registration.KeyServiceAccountNamespace])).To(Equal(registration.AgentIdentityNamespace))
				g.Expect(string(s.Data[registration.KeyClusterNamespace])).To(Equal(d.clusterNS))
				g.Expect(string(s.Data[registration.KeyToken])).NotTo(BeEmpty())
				g.Expect(string(s.Data[registration.KeyToken])).NotTo(Equal(legacyToken(ctx, d)))
				// The agent says so in its own cluster.
				ev, err := testenv.Events(ctx, d.kube, fleet.SystemNamespace, "Secret", registration.AgentSecret)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ev["CredentialExchanged"]).To(ContainElement(ContainSubstring("traded the credential Fleet stored")))
			}).Should(Succeed(), d.env)
			// And it goes on checking in with it.
			seen := time.Now()
			Eventually(func(g Gomega) {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, d.name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(c.Status.Agent.LastSeen.Time).To(BeTemporally(">", seen.Add(-time.Second)))
			}).Should(Succeed(), d.env)
		}
		regs, err := api.ClusterRegistration().List(fleet.DefaultNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(regs.Items).To(BeEmpty())

		// What the take-over granted Fleet's identities: tokens of their own cluster's agent
		// identity, and nothing else.
		for i, d := range downstreams {
			cfg := rest.AnonymousClientConfig(manager.RESTConfig())
			cfg.BearerToken = legacyToken(ctx, d)
			legacy, err := kubernetes.NewForConfig(cfg)
			Expect(err).NotTo(HaveOccurred())
			ids := legacy.CoreV1().ServiceAccounts(registration.AgentIdentityNamespace)
			_, err = ids.CreateToken(ctx, registration.AgentServiceAccount(d.clusterNS), &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = ids.CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a token of another ServiceAccount: %v", err)
			_, err = legacy.CoreV1().ServiceAccounts(d.clusterNS).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a token of a ServiceAccount of its own cluster namespace: %v", err)
			other := downstreams[(i+1)%len(downstreams)]
			_, err = ids.CreateToken(ctx, registration.AgentServiceAccount(other.clusterNS), &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a token of another cluster's agent: %v", err)
		}
		tokens, err := api.ClusterRegistrationToken().List(fleet.DefaultNamespace, metav1.ListOptions{LabelSelector: labels.Everything().String()})
		Expect(err).NotTo(HaveOccurred())
		Expect(tokens.Items).To(BeEmpty())
	})

	It("rolls out the repository's next commit as usual", func(ctx context.Context) {
		src := filepath.Join(GinkgoT().TempDir(), "repo")
		Expect(os.MkdirAll(filepath.Join(src, "app"), 0o755)).To(Succeed())
		for name, content := range appFiles {
			if name == "configmap.yaml" {
				content = strings.Replace(content, "greeting: hello", "greeting: moved", 1)
			}
			Expect(os.WriteFile(filepath.Join(src, "app", name), []byte(content), 0o644)).To(Succeed())
		}
		writeValuesFolder(src)
		next, err := git.Publish(ctx, repoName, branch, src, "after the move")
		Expect(err).NotTo(HaveOccurred())
		for _, d := range downstreams {
			Eventually(func(g Gomega) {
				cm, err := d.kube.CoreV1().ConfigMaps(appNamespace).Get(ctx, "app-settings", metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cm.Data["greeting"]).To(Equal("moved"))
			}, 3*time.Minute).Should(Succeed(), d.env)
		}
		Eventually(func(g Gomega) {
			gr, err := api.GitRepo().Get(fleet.DefaultNamespace, gitRepoName, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(gr.Status.Commit).To(Equal(next))
			g.Expect(gr.Status.Display.ReadyBundleDeployments).To(Equal("4/4"))
		}, 2*time.Minute).Should(Succeed())
		for _, d := range downstreams {
			Eventually(func(g Gomega) {
				workloadsUntouched(ctx, g, d)
				valuesKept(ctx, g, d)
			}).Should(Succeed(), d.env)
		}
	})
})
