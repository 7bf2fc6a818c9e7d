package registration_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	wapply "github.com/rancher/wrangler/v3/pkg/apply"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/agent"
	"github.com/fleetgo/fleet/internal/agent/register"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

const agentNS = "cattle-fleet-system"

// fleetCLI runs the fleet command line in-process and returns what it printed.
func fleetCLI(args ...string) string {
	out, err := testenv.FleetCLI(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// kubectlApply applies a manifest to the cluster as a user would.
func kubectlApply(d *localcluster.Cluster, manifest string) {
	Expect(testenv.KubectlApply(d.Kubeconfig, manifest, nil)).To(Succeed())
}

// tokenValues reads the values a token's Secret hands out.
func tokenValues(name string) registration.Values {
	var v registration.Values
	s, err := managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Get(context.Background(), name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.Unmarshal(s.Data[registration.ValuesKey], &v)).To(Succeed())
	return v
}

// newToken creates a ClusterRegistrationToken in fleet-default and returns the values its
// Secret hands out.
func newToken(name string, ttl time.Duration) registration.Values {
	tok := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}}
	if ttl > 0 {
		tok.Spec.TTL = &metav1.Duration{Duration: ttl}
	}
	_, err := api.ClusterRegistrationToken().Create(tok)
	Expect(err).NotTo(HaveOccurred())
	var v registration.Values
	Eventually(func(g Gomega) {
		t, err := api.ClusterRegistrationToken().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(t.Status.SecretName).To(Equal(name))
		if ttl > 0 {
			g.Expect(t.Status.Expires).NotTo(BeNil())
		}
		s, err := managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Get(context.Background(), t.Status.SecretName, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.Unmarshal(s.Data[registration.ValuesKey], &v)).To(Succeed())
	}).Should(Succeed())
	Expect(v.Token).NotTo(BeEmpty())
	Expect(v.ClusterNamespace).To(Equal(fleet.DefaultNamespace))
	Expect(v.SystemRegistrationNamespace).To(Equal(fleet.ClustersSystemNamespace))
	return v
}

// bootstrap writes what installing the fleet-agent chart with a token's values writes into a
// downstream cluster: the bootstrap Secret and the agent ConfigMap with its labels.
func bootstrap(kube kubernetes.Interface, ns string, v registration.Values, labels map[string]string) {
	ctx := context.Background()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.BootstrapSecret, Namespace: ns},
		StringData: map[string]string{registration.KeyToken: v.Token, registration.KeyAPIServerURL: v.APIServerURL,
			registration.KeyAPIServerCA: v.APIServerCA, registration.KeyClusterNamespace: v.ClusterNamespace,
			registration.KeySystemRegistrationNS: v.SystemRegistrationNamespace}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	cfg, _ := json.Marshal(map[string]any{"labels": labels})
	_ = kube.CoreV1().ConfigMaps(ns).Delete(ctx, registration.AgentConfigMap, metav1.DeleteOptions{})
	_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: registration.AgentConfigMap, Namespace: ns},
		Data: map[string]string{registration.ConfigKey: string(cfg)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// startAgent runs an agent for the downstream cluster with nothing but what is stored there.
func startAgent(d *localcluster.Cluster, renewEvery time.Duration) context.CancelFunc {
	return startAgentIn(d, agentNS, renewEvery)
}

func startAgentIn(d *localcluster.Cluster, ns string, renewEvery time.Duration) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		err := agent.RunRegistered(ctx, d.RESTConfig(), agent.Options{Namespace: ns, CheckinInterval: 2 * time.Second,
			MonitorInterval: 3 * time.Second, GCInterval: 10 * time.Second, Workers: 4},
			register.Options{PollInterval: 200 * time.Millisecond}, renewEvery)
		Expect(err).NotTo(HaveOccurred())
	}()
	return cancel
}

func clientsetOf(d *localcluster.Cluster) kubernetes.Interface {
	k, err := d.Clientset()
	Expect(err).NotTo(HaveOccurred())
	return k
}

func clientID(d *localcluster.Cluster) string {
	ks, err := clientsetOf(d).CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return string(ks.UID)
}

func storedCredential(d *localcluster.Cluster) *register.Credential {
	c, err := register.Stored(context.Background(), clientsetOf(d), agentNS)
	Expect(err).NotTo(HaveOccurred())
	Expect(c).NotTo(BeNil())
	return c
}

// asAgent returns clients acting with exactly the agent's credential.
func asAgent(c *register.Credential) (kubernetes.Interface, fleetcontrollers.Interface) {
	cfg := &rest.Config{Host: c.APIServerURL, BearerToken: c.Token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(c.APIServerCA)}}
	k, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	f, err := fleetfactory.NewFactoryFromConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	return k, f.Fleet().V1alpha1()
}

func configMapBundle(name, selectorKey, selectorValue, data string) {
	_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: name},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name +
				"\ndata:\n  value: " + data + "\n"}},
			Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{selectorKey: selectorValue}}}},
		}})
	Expect(err).NotTo(HaveOccurred())
}

func deployedValue(d *localcluster.Cluster, name string) func() string {
	return func() string {
		cm, err := clientsetOf(d).CoreV1().ConfigMaps(name).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return cm.Data["value"]
	}
}

var _ = Describe("cluster registration", Ordered, func() {
	var (
		downA, downB *localcluster.Cluster
		values       registration.Values
		stopA        context.CancelFunc
		clusterA     string
	)
	BeforeAll(func() {
		downA, downB = downstreams[0], downstreams[1]
	})

	It("registers a cluster from `fleet install agent-token` and `agent-config` output, forgets the token and deploys a Bundle", func() {
		kubeA := clientsetOf(downA)
		kubectlApply(downA, fleetCLI("install", "agent-config", "-l", "env=dev", "-l", "type=edge", "-l", "fleet.cattle.io/cluster=forged"))
		kubectlApply(downA, fleetCLI("install", "agent-token", "--kubeconfig", manager.Kubeconfig, "--name", "cli-token", "--ttl", "0"))
		values = tokenValues("cli-token")
		stopA = startAgent(downA, 0)

		clusterA = registration.ClusterName(clientID(downA))
		var c *fleet.Cluster
		Eventually(func() error {
			var err error
			c, err = api.Cluster().Get(fleet.DefaultNamespace, clusterA, metav1.GetOptions{})
			return err
		}).Should(Succeed())
		Expect(c.Labels).To(HaveKeyWithValue("env", "dev"))
		Expect(c.Labels).To(HaveKeyWithValue("type", "edge"))
		Expect(c.Labels).NotTo(HaveKey("fleet.cattle.io/cluster"), "agent-supplied fleet.cattle.io/ labels are dropped")
		Expect(c.Spec.ClientID).To(Equal(clientID(downA)))

		Eventually(func() bool {
			_, err := kubeA.CoreV1().Secrets(agentNS).Get(context.Background(), registration.BootstrapSecret, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue(), "the token Secret is deleted downstream after registration")
		cred := storedCredential(downA)
		Expect(cred.ClusterName).To(Equal(clusterA))
		stored, err := kubeA.CoreV1().Secrets(agentNS).Get(context.Background(), registration.AgentSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		kc, err := clientcmd.RESTConfigFromKubeConfig(stored.Data[registration.KeyKubeconfig])
		Expect(err).NotTo(HaveOccurred(), "the agent's Secret holds its credential as a kubeconfig too")
		Expect(kc.BearerToken).To(Equal(cred.Token))
		Expect(cred.Token).NotTo(Equal(values.Token))

		configMapBundle("only-dev", "env", "dev", "one")
		Eventually(deployedValue(downA, "only-dev")).Should(Equal("one"))
		Eventually(func(g Gomega) {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterA, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Status.Agent.LastSeen.IsZero()).To(BeFalse(), "the heartbeat reaches the Cluster with the agent's credential")
			g.Expect(c.Status.Display.ReadyBundles).To(Equal("1/1"))
			ev, err := testenv.Events(context.Background(), managerKube, fleet.DefaultNamespace, "Cluster", clusterA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["Registered"]).To(ContainElement(ContainSubstring("an agent registered as this cluster")))
		}).Should(Succeed())
	})

	It("installs the agent of its own cluster through the local-cluster kubeconfig it wrote", func(ctx context.Context) {
		Eventually(func(g Gomega) {
			c, err := api.Cluster().Get(fleet.LocalNamespace, "local", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			cond := fleet.FindCondition(c.Status.Conditions, "Imported")
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(corev1.ConditionTrue), cond.Message)
		}).Should(Succeed())
		_, err := managerKube.AppsV1().Deployments("cattle-fleet-local-system").Get(ctx, "fleet-agent", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("deploys a GitRepo's commit to the registered cluster, and removes it with the GitRepo", func(ctx context.Context) {
		g, err := localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "git"), localserver.BasicAuth{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(g.Close)
		src := GinkgoT().TempDir()
		Expect(os.MkdirAll(filepath.Join(src, "app"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, "app", "fleet.yaml"), []byte("defaultNamespace: from-git\n"), 0o644)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(src, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-git\ndata:\n  value: git\n"), 0o644)).To(Succeed())
		_, err = g.Publish(ctx, "apps", "main", src, "first")
		Expect(err).NotTo(HaveOccurred())
		_, err = api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: g.RepoURL("apps"), Branch: "main", Paths: []string{"app"},
				Targets: []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(deployedValue(downA, "from-git"), 2*time.Minute).Should(Equal("git"))

		Expect(api.GitRepo().Delete(fleet.DefaultNamespace, "apps", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := clientsetOf(downA).CoreV1().ConfigMaps("from-git").Get(ctx, "from-git", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 2*time.Minute).Should(BeTrue(), "the GitRepo's workload goes with it")
	})

	It("lets the agent's credential touch nothing but its own BundleDeployments, their status and its Cluster's status", func() {
		ctx := context.Background()
		_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: fleet.DefaultNamespace}})
		Expect(err).NotTo(HaveOccurred())
		var otherNS string
		Eventually(func() string {
			c, _ := api.Cluster().Get(fleet.DefaultNamespace, "other", metav1.GetOptions{})
			if c == nil {
				return ""
			}
			otherNS = c.Status.Namespace
			return otherNS
		}).ShouldNot(BeEmpty())

		cred := storedCredential(downA)
		kube, fl := asAgent(cred)
		forbidden := func(err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want 403, got %v", err)
		}

		own, err := fl.BundleDeployment().List(cred.ClusterNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(own.Items).To(HaveLen(1))

		_, err = fl.BundleDeployment().List(otherNS, metav1.ListOptions{})
		forbidden(err)
		_, err = kube.CoreV1().Secrets(otherNS).List(ctx, metav1.ListOptions{})
		forbidden(err)
		_, err = kube.CoreV1().Secrets(cred.ClusterNamespace).List(ctx, metav1.ListOptions{})
		forbidden(err)
		// Copies of downstreamResources are read by name in its own namespace only.
		_, err = kube.CoreV1().ConfigMaps(cred.ClusterNamespace).List(ctx, metav1.ListOptions{})
		forbidden(err)
		_, err = kube.CoreV1().ConfigMaps(otherNS).Get(ctx, "anything", metav1.GetOptions{})
		forbidden(err)
		_, err = fl.BundleDeployment().List("", metav1.ListOptions{})
		forbidden(err)

		_, err = fl.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: cred.ClusterNamespace}})
		forbidden(err)
		bd := own.Items[0].DeepCopy()
		bd.Spec.Paused = true
		_, err = fl.BundleDeployment().Update(bd)
		forbidden(err)
		_, err = fl.BundleDeployment().UpdateStatus(own.Items[0].DeepCopy())
		Expect(err).NotTo(HaveOccurred(), "the agent writes its BundleDeployments' status")

		patch := []byte(`{"status":{"agent":{"lastSeen":"2020-01-01T00:00:00Z"}}}`)
		_, err = fl.Cluster().Patch(fleet.DefaultNamespace, "other", types.MergePatchType, patch, "status")
		forbidden(err)
		// RBAC lets the agents of a namespace patch its Clusters' status (one binding for all of
		// them); the admission policy holds each to the Cluster its identity annotation names.
		Expect(err.Error()).To(ContainSubstring("status of its own Cluster"))
		_, err = api.Cluster().Patch(fleet.DefaultNamespace, "other", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+registration.IdentityAnnotation+`":"`+registration.AgentIdentity(otherNS)+`"}}}`))
		Expect(err).NotTo(HaveOccurred())
		_, err = fl.Cluster().Patch(fleet.DefaultNamespace, "other", types.MergePatchType, patch, "status")
		forbidden(err)
		Expect(err.Error()).To(ContainSubstring("status of its own Cluster"), "another agent's Cluster")
		_, err = fl.Cluster().Patch("fleet-local", "local", types.MergePatchType, patch, "status")
		forbidden(err)
		_, err = fl.Cluster().Patch(fleet.DefaultNamespace, clusterA, types.MergePatchType, patch)
		forbidden(err)
		_, err = fl.Cluster().Patch(fleet.DefaultNamespace, clusterA, types.MergePatchType, []byte(`{"status":{"agent":{"namespace":"`+agentNS+`"}}}`), "status")
		Expect(err).NotTo(HaveOccurred(), "the agent patches its own Cluster's status")
		// A Cluster an earlier build registered has no identity annotation (one made ahead of
		// time, as the local cluster is): the manager names the identity it gave, and the
		// agent's check-ins pass again.
		_, err = api.Cluster().Patch(fleet.DefaultNamespace, clusterA, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/annotations/fleet.cattle.io~1agent-identity"}]`))
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			c, _ := api.Cluster().Get(fleet.DefaultNamespace, clusterA, metav1.GetOptions{})
			if c == nil {
				return ""
			}
			return c.Annotations[registration.IdentityAnnotation]
		}).Should(Equal(registration.AgentIdentity(cred.ClusterNamespace)))
		_, err = managerKube.RbacV1().RoleBindings(registration.AgentIdentityNamespace).Get(ctx,
			names.SafeConcatName(registration.AgentServiceAccount(cred.ClusterNamespace), "exchange"), metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "its own identity is named, not taken over (no credential trade opened): %v", err)
		_, err = fl.Cluster().Patch(fleet.DefaultNamespace, clusterA, types.MergePatchType, []byte(`{"status":{"agent":{"namespace":"`+agentNS+`"}}}`), "status")
		Expect(err).NotTo(HaveOccurred(), "the agent checks in again")

		_, err = fl.Content().List(metav1.ListOptions{})
		forbidden(err)
		_, err = fl.Content().Get(strings.SplitN(own.Items[0].Spec.DeploymentID, ":", 2)[0], metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the agent gets Contents by name")
		_, err = fl.ClusterRegistrationToken().List(fleet.DefaultNamespace, metav1.ListOptions{})
		forbidden(err)

		// Its identity lives in the agent identity namespace: it renews its own token there, and
		// no other's; it reads nothing there.
		Expect(cred.SANamespace).To(Equal(registration.AgentIdentityNamespace))
		Expect(cred.SA).To(Equal(registration.AgentServiceAccount(cred.ClusterNamespace)))
		ids := kube.CoreV1().ServiceAccounts(registration.AgentIdentityNamespace)
		_, err = ids.CreateToken(ctx, cred.SA, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "the agent renews its own credential")
		_, err = ids.CreateToken(ctx, registration.AgentServiceAccount(otherNS), &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		forbidden(err)
		_, err = ids.CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		forbidden(err)
		_, err = ids.Get(ctx, cred.SA, metav1.GetOptions{})
		forbidden(err)
		_, err = kube.CoreV1().Secrets(registration.AgentIdentityNamespace).List(ctx, metav1.ListOptions{})
		forbidden(err)

		// Contents come through one binding shared by every agent: no ClusterRoleBinding names a
		// single agent.
		crbs, err := managerKube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, crb := range crbs.Items {
			for _, sub := range crb.Subjects {
				Expect(sub.Namespace).NotTo(Equal(registration.AgentIdentityNamespace), "ClusterRoleBinding %s", crb.Name)
				Expect(sub.Namespace).NotTo(HavePrefix("cluster-"), "ClusterRoleBinding %s", crb.Name)
			}
		}
	})

	It("takes no namespace from what an agent writes: the agent cannot move its Cluster's namespace, and a moved one steers nothing", func() {
		ctx := context.Background()
		cred := storedCredential(downA)
		_, fl := asAgent(cred)
		other, err := api.Cluster().Get(fleet.DefaultNamespace, "other", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		otherNS := target.ClusterNamespace(other)
		for _, ns := range []string{otherNS, metav1.NamespaceSystem} {
			_, err := fl.Cluster().Patch(fleet.DefaultNamespace, clusterA, types.MergePatchType, []byte(`{"status":{"namespace":"`+ns+`"}}`), "status")
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "want the admission policy's refusal, got %v", err)
			Expect(err.Error()).To(ContainSubstring("status.namespace"))
		}
		_, err = fl.Cluster().Patch(fleet.DefaultNamespace, clusterA, types.MergePatchType, []byte(`{"status":{"display":{"readyBundles":"99/99"}}}`), "status")
		Expect(err).To(HaveOccurred(), "no manager-written status field is the agent's to set")
		c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterA, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Status.Namespace).To(Equal(cred.ClusterNamespace))

		// Had the policy been missing: an administrator (whom it does not bind) points a Cluster's
		// status.namespace at kube-system and at another cluster's namespace. The manager still
		// writes to, and on deletion removes, only the namespace it derived and created.
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "squatter", Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{"squat": "yes"}}})
		Expect(err).NotTo(HaveOccurred())
		var squatter *fleet.Cluster
		Eventually(func() string {
			squatter, _ = api.Cluster().Get(fleet.DefaultNamespace, "squatter", metav1.GetOptions{})
			if squatter == nil {
				return ""
			}
			return squatter.Status.Namespace
		}).ShouldNot(BeEmpty())
		ownNS := target.ClusterNamespace(squatter)
		Expect(squatter.Status.Namespace).To(Equal(ownNS))
		moved := squatter.DeepCopy()
		moved.Status.Namespace = metav1.NamespaceSystem
		_, err = api.Cluster().UpdateStatus(moved)
		Expect(err).NotTo(HaveOccurred())
		configMapBundle("to-squatter", "squat", "yes", "x")
		Eventually(func() ([]fleet.BundleDeployment, error) {
			l, err := api.BundleDeployment().List(ownNS, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return l.Items, nil
		}).Should(HaveLen(1))
		for _, ns := range []string{metav1.NamespaceSystem, otherNS} {
			l, err := api.BundleDeployment().List(ns, metav1.ListOptions{LabelSelector: fleet.BundleLabel + "=to-squatter"})
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Items).To(BeEmpty(), "nothing lands in %s", ns)
		}

		Eventually(func() error {
			cur, err := api.Cluster().Get(fleet.DefaultNamespace, "squatter", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Namespace = otherNS
			_, err = api.Cluster().UpdateStatus(cur)
			return err
		}).Should(Succeed())
		Expect(api.Cluster().Delete(fleet.DefaultNamespace, "squatter", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := api.Cluster().Get(fleet.DefaultNamespace, "squatter", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second).Should(BeTrue())
		Eventually(func() bool {
			ns, err := managerKube.CoreV1().Namespaces().Get(ctx, ownNS, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil)
		}).Should(BeTrue(), "the namespace the manager created for the Cluster goes with it")
		for _, name := range []string{metav1.NamespaceSystem, otherNS} {
			ns, err := managerKube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(ns.DeletionTimestamp).To(BeNil(), "namespace %s is left alone", name)
		}
		Expect(api.Bundle().Delete(fleet.DefaultNamespace, "to-squatter", &metav1.DeleteOptions{})).To(Succeed())
	})

	It("deletes an agent's credential Secret once the agent has checked in with it, and keeps one no agent has used", func() {
		credentials := func(cluster string) func(g Gomega) []string {
			return func(g Gomega) []string {
				l, err := managerKube.CoreV1().Secrets(fleet.ClustersSystemNamespace).List(context.Background(),
					metav1.ListOptions{LabelSelector: fleet.ClusterLabel + "=" + cluster})
				g.Expect(err).NotTo(HaveOccurred())
				var names []string
				for _, s := range l.Items {
					if s.Type == registration.CredentialSecretType {
						names = append(names, s.Name)
					}
				}
				return names
			}
		}
		// The first spec's agent registered and checks in every 2 seconds.
		regs, err := api.ClusterRegistration().List(fleet.DefaultNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		granted := 0
		for _, r := range regs.Items {
			if r.Spec.ClientID == clientID(downA) && r.Status.Granted {
				granted++
			}
		}
		Expect(granted).To(BeNumerically(">=", 1), "cluster A's registration was granted")
		Eventually(credentials(clusterA)).Should(BeEmpty(), "the picked-up credential is not left for 40 minutes")

		// A registration whose agent never checks in: its Secret waits for it.
		reg, err := api.ClusterRegistration().Create(&fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "never-checks-in-", Namespace: fleet.DefaultNamespace},
			Spec:       fleet.ClusterRegistrationSpec{ClientID: "never-checks-in", ClientRandom: "r4nd0m"}})
		Expect(err).NotTo(HaveOccurred())
		idle := registration.ClusterName("never-checks-in")
		DeferCleanup(func() {
			Expect(api.ClusterRegistration().Delete(reg.Namespace, reg.Name, &metav1.DeleteOptions{})).To(Succeed())
			Expect(api.Cluster().Delete(fleet.DefaultNamespace, idle, &metav1.DeleteOptions{})).To(Succeed())
			Eventually(func() bool {
				_, err := api.Cluster().Get(fleet.DefaultNamespace, idle, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}).Should(BeTrue())
			Eventually(credentials(idle)).Should(BeEmpty(), "a deleted registration's Secret goes with it")
		})
		Eventually(credentials(idle)).Should(ConsistOf(registration.CredentialSecret("never-checks-in", "r4nd0m")))
		Consistently(credentials(idle), 3*time.Second).Should(HaveLen(1), "no agent checked in: the Secret stays")
	})

	It("registers a second cluster with the same token as a distinct Cluster", func() {
		kubeB := clientsetOf(downB)
		bootstrap(kubeB, agentNS, values, map[string]string{"env": "prod", "type": "alpha"})
		stopB := startAgent(downB, 0)
		defer stopB()
		clusterB := registration.ClusterName(clientID(downB))
		Expect(clusterB).NotTo(Equal(clusterA))
		Eventually(func() error {
			_, err := api.Cluster().Get(fleet.DefaultNamespace, clusterB, metav1.GetOptions{})
			return err
		}).Should(Succeed())
		configMapBundle("only-prod", "env", "prod", "two")
		Eventually(deployedValue(downB, "only-prod")).Should(Equal("two"))
		Consistently(deployedValue(downA, "only-prod"), 2*time.Second).Should(BeEmpty())
	})

	It("seals a SOPS file from git to each of two clusters' own keys: each Secret downstream holds its value, nothing of the manager's does, and one cluster's agent opens nothing of another's", func(ctx context.Context) {
		sealsGitSecretsToEachCluster(ctx, downA, downB)
	})

	It("maps a re-registration of the same cluster to the same Cluster, with the labels it had", func() {
		stopA()
		ctx := context.Background()
		kubeA := clientsetOf(downA)
		Expect(kubeA.CoreV1().Secrets(agentNS).Delete(ctx, registration.AgentSecret, metav1.DeleteOptions{})).To(Succeed())
		bootstrap(kubeA, agentNS, values, map[string]string{"env": "changed-downstream"})
		stopA = startAgent(downA, 0)
		Eventually(func() string {
			c, err := register.Stored(ctx, kubeA, agentNS)
			if err != nil || c == nil {
				return ""
			}
			return c.ClusterName
		}).Should(Equal(clusterA))
		c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterA, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Labels).To(HaveKeyWithValue("env", "dev"), "labels apply at the first registration only")
		all, err := api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		ids := 0
		for _, c := range all.Items {
			if c.Spec.ClientID == clientID(downA) {
				ids++
			}
		}
		Expect(ids).To(Equal(1))
		configMapBundle("after-reregistration", "env", "dev", "three")
		Eventually(deployedValue(downA, "after-reregistration")).Should(Equal("three"))
	})

	It("installs the agent into a cluster it can reach with spec.kubeConfigSecret; that agent registers as that Cluster", func() {
		ctx := context.Background()
		kubeconfig, err := os.ReadFile(downB.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		_, err = managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "imported-kubeconfig", Namespace: fleet.DefaultNamespace},
			Data:       map[string][]byte{"value": kubeconfig}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "imported", Namespace: fleet.DefaultNamespace,
			Labels: map[string]string{"import": "yes"}},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "imported-kubeconfig", AgentNamespace: "imported-agent"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, "imported", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.Status.AgentDeployedGeneration).NotTo(BeNil())
			g.Expect(fleet.FindCondition(c.Status.Conditions, "Imported")).NotTo(BeNil())
			g.Expect(fleet.FindCondition(c.Status.Conditions, "Imported").Status).To(Equal(corev1.ConditionTrue))
		}).Should(Succeed())
		kubeB := clientsetOf(downB)
		_, err = kubeB.CoreV1().Secrets("imported-agent").Get(ctx, registration.BootstrapSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "the manager wrote the registration token downstream")
		_, err = kubeB.AppsV1().Deployments("imported-agent").Get(ctx, "fleet-agent", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "and the agent's Deployment")

		// No kubelet here: run what the Deployment would run.
		stop := startAgentIn(downB, "imported-agent", 0)
		defer stop()
		Eventually(func() string {
			c, err := register.Stored(ctx, kubeB, "imported-agent")
			if err != nil || c == nil {
				return ""
			}
			return c.ClusterName
		}).Should(Equal("imported"))
		configMapBundle("imported-only", "import", "yes", "four")
		Eventually(deployedValue(downB, "imported-only")).Should(Equal("four"))
	})

	It("uses no kubeconfig of another namespace, and the manager's own local-cluster credential for no other Cluster", func() {
		imported := func(ns, name string) func(g Gomega) {
			return func(g Gomega) {
				c, err := api.Cluster().Get(ns, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				cond := fleet.FindCondition(c.Status.Conditions, "Imported")
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
				g.Expect(cond.Message).To(ContainSubstring(c.Spec.KubeConfigSecret))
			}
		}
		// The local Cluster's credential is the manager's own: bootstrap wrote it in the system
		// namespace (and none in fleet-local, where a GitRepo could name it).
		_, err := managerKube.CoreV1().Secrets(fleet.LocalNamespace).Get(context.Background(), "local-cluster", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no manager credential in fleet-local: %v", err)
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "borrower", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "local-cluster", KubeConfigSecretNamespace: fleet.LocalNamespace, AgentNamespace: "borrowed"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "neighbour", Namespace: fleet.LocalNamespace},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "local-cluster", KubeConfigSecretNamespace: systemNS, AgentNamespace: "borrowed"}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(imported(fleet.DefaultNamespace, "borrower")).Should(Succeed())
		Eventually(imported(fleet.LocalNamespace, "neighbour")).Should(Succeed())
		c, _ := api.Cluster().Get(fleet.DefaultNamespace, "borrower", metav1.GetOptions{})
		Expect(fleet.FindCondition(c.Status.Conditions, "Imported").Message).To(ContainSubstring("own namespace"))
		c, _ = api.Cluster().Get(fleet.LocalNamespace, "neighbour", metav1.GetOptions{})
		Expect(fleet.FindCondition(c.Status.Conditions, "Imported").Message).To(ContainSubstring("cannot be used for cluster fleet-local/neighbour"))
		_, err = managerKube.AppsV1().Deployments("borrowed").Get(context.Background(), "fleet-agent", metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no agent was installed with a borrowed credential: %v", err)
		for _, c := range []struct{ ns, name string }{{fleet.DefaultNamespace, "borrower"}, {fleet.LocalNamespace, "neighbour"}} {
			Expect(api.Cluster().Delete(c.ns, c.name, &metav1.DeleteOptions{})).To(Succeed())
		}
	})

	It("keeps credentials out of the records of the apply sets that write them", func(ctx context.Context) {
		checked := 0
		for _, ns := range []string{fleet.DefaultNamespace, fleet.ClustersSystemNamespace} {
			secrets, err := managerKube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: wapply.LabelHash})
			Expect(err).NotTo(HaveOccurred())
			for _, s := range secrets.Items {
				record := appliedRecord(s.Annotations[wapply.LabelApplied])
				Expect(record).NotTo(BeEmpty(), "secret %s/%s", s.Namespace, s.Name)
				for _, key := range []string{registration.KeyToken, registration.ValuesKey} {
					if v := s.Data[key]; len(v) > 0 {
						checked++
						Expect(record).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString(v)), "secret %s/%s key %s", s.Namespace, s.Name, key)
					}
				}
			}
		}
		Expect(checked).To(BeNumerically(">=", 2), "token values and agent credentials were checked")
	})

	It("refuses an expired token with a clear message", func() {
		short := newToken("short-lived", 3*time.Second)
		Eventually(func() bool {
			_, err := api.ClusterRegistrationToken().Get(fleet.DefaultNamespace, "short-lived", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 30*time.Second).Should(BeTrue(), "an expired token is deleted")
		kubeB := clientsetOf(downB)
		bootstrap(kubeB, "expired-agent", short, nil)
		_, err := register.Register(context.Background(), kubeB, register.Options{Namespace: "expired-agent", ClientID: "expired-test"})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("refused the registration token (401 Unauthorized): it has expired or was deleted"))
		_, err = api.Cluster().Get(fleet.DefaultNamespace, registration.ClusterName("expired-test"), metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	It("takes over a cluster registered before agent identities moved: its agent trades the earlier credential for its own ServiceAccount's token", func(ctx context.Context) {
		// A Cluster as an earlier build left it: its agent's ServiceAccount in the cluster
		// namespace, a credential of that ServiceAccount without serviceAccountNamespace, the
		// earlier identity annotation, and an agent that has checked in.
		_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "earlier", Namespace: fleet.DefaultNamespace,
			Annotations: map[string]string{registration.IdentityAnnotation: "fleet-agent"}}})
		Expect(err).NotTo(HaveOccurred())
		var ns string
		Eventually(func() string {
			c, _ := api.Cluster().Get(fleet.DefaultNamespace, "earlier", metav1.GetOptions{})
			if c != nil {
				ns = c.Status.Namespace
			}
			return ns
		}).ShouldNot(BeEmpty())
		_, err = managerKube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		tr, err := managerKube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "fleet-agent", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		mcfg := manager.RESTConfig()
		earlier := &register.Credential{Token: tr.Status.Token, APIServerURL: mcfg.Host, APIServerCA: string(mcfg.CAData),
			ClusterNamespace: ns, ClusterName: "earlier", ClusterObjectNamespace: fleet.DefaultNamespace, SA: "fleet-agent"}
		kube, fl := asAgent(earlier)
		ids := kube.CoreV1().ServiceAccounts(registration.AgentIdentityNamespace)
		own := registration.AgentServiceAccount(ns)
		_, err = ids.CreateToken(ctx, own, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "no trade before the take-over: %v", err)
		_, err = managerKube.CoreV1().ServiceAccounts(registration.AgentIdentityNamespace).Get(ctx, own, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no identity before an agent checks in: %v", err)

		now := metav1.Now().UTC().Format(time.RFC3339)
		_, err = api.Cluster().Patch(fleet.DefaultNamespace, "earlier", types.MergePatchType, []byte(`{"status":{"agent":{"lastSeen":"`+now+`"}}}`), "status")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string {
			c, _ := api.Cluster().Get(fleet.DefaultNamespace, "earlier", metav1.GetOptions{})
			if c == nil {
				return ""
			}
			return c.Annotations[registration.IdentityAnnotation]
		}).Should(Equal(registration.AgentIdentity(ns)), "the manager takes the cluster over")

		var traded *authenticationv1.TokenRequest
		Eventually(func() error {
			traded, err = ids.CreateToken(ctx, own, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}).Should(Succeed(), "the earlier credential trades for a token of the cluster's own ServiceAccount")
		_, err = ids.CreateToken(ctx, registration.AgentServiceAccount(storedCredential(downA).ClusterNamespace), &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "and for no other cluster's: %v", err)
		_, err = fl.BundleDeployment().List(storedCredential(downA).ClusterNamespace, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the earlier credential reads no other cluster's deployments: %v", err)

		tradedCred := register.Credential{Token: traded.Status.Token, APIServerURL: mcfg.Host, APIServerCA: string(mcfg.CAData)}
		_, fl2 := asAgent(&tradedCred)
		_, err = fl2.BundleDeployment().List(ns, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred(), "the traded credential reads its cluster's BundleDeployments")
		_, err = fl2.Cluster().Patch(fleet.DefaultNamespace, "earlier", types.MergePatchType, []byte(`{"status":{"agent":{"lastSeen":"`+now+`"}}}`), "status")
		Expect(err).NotTo(HaveOccurred(), "and checks in on its Cluster")
		Expect(identityObjects(ctx, ns)()).To(ConsistOf("ServiceAccount "+own, "Role "+own, "RoleBinding "+own,
			"RoleBinding "+names.SafeConcatName(own, "exchange")), "the taken-over cluster's identity")
		Expect(api.Cluster().Delete(fleet.DefaultNamespace, "earlier", &metav1.DeleteOptions{})).To(Succeed())
		Eventually(identityObjects(ctx, ns)).Should(BeEmpty(), "the deleted Cluster's identity, its exchange binding included, is gone")
		Eventually(func() bool {
			_, err := fl2.BundleDeployment().List(ns, metav1.ListOptions{})
			return apierrors.IsUnauthorized(err)
		}, 20*time.Second).Should(BeTrue(), "and its traded credential is refused")
	})

	It("keeps a renewed credential working, and a deleted Cluster's agent loses access", func() {
		stopA()
		first := storedCredential(downA).Token
		stopA = startAgent(downA, 2*time.Second)
		DeferCleanup(func() { stopA() })
		seen := map[string]bool{first: true}
		Eventually(func() int {
			seen[storedCredential(downA).Token] = true
			return len(seen)
		}, 30*time.Second).Should(BeNumerically(">=", 3), "the credential is renewed again and again")
		Eventually(func(g Gomega) {
			ev, err := testenv.Events(context.Background(), clientsetOf(downA), agentNS, "Secret", registration.AgentSecret)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ev["CredentialRenewed"]).To(ContainElement(ContainSubstring("renewed the credential on the manager")))
		}).Should(Succeed(), "the agent records each renewal in its own cluster")

		Expect(updateBundleValue("only-dev", "renewed")).To(Succeed())
		Eventually(deployedValue(downA, "only-dev")).Should(Equal("renewed"))

		cred := storedCredential(downA)
		_, fl := asAgent(cred)
		_, err := fl.BundleDeployment().List(cred.ClusterNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(identityObjects(context.Background(), cred.ClusterNamespace)()).To(ConsistOf(
			"ServiceAccount "+cred.SA, "Role "+cred.SA, "RoleBinding "+cred.SA), "the registered cluster's identity")
		Expect(api.Cluster().Delete(fleet.DefaultNamespace, clusterA, &metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() bool {
			_, err := fl.BundleDeployment().List(cred.ClusterNamespace, metav1.ListOptions{})
			return apierrors.IsUnauthorized(err)
		}, 20*time.Second).Should(BeTrue(), "the deleted Cluster's agent is refused")
		Eventually(identityObjects(context.Background(), cred.ClusterNamespace)).Should(BeEmpty(), "its identity is gone")
	})
})

// identityObjects lists what the agent identity namespace holds for the agent of cluster
// namespace ns: its ServiceAccount, token Role and bindings (the exchange binding of a taken-over
// cluster included), as "Kind name".
func identityObjects(ctx context.Context, ns string) func() []string {
	return func() []string {
		sa, idNS := registration.AgentServiceAccount(ns), registration.AgentIdentityNamespace
		var found []string
		if _, err := managerKube.CoreV1().ServiceAccounts(idNS).Get(ctx, sa, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			found = append(found, "ServiceAccount "+sa)
		}
		if _, err := managerKube.RbacV1().Roles(idNS).Get(ctx, sa, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			found = append(found, "Role "+sa)
		}
		for _, name := range []string{sa, names.SafeConcatName(sa, "exchange")} {
			if _, err := managerKube.RbacV1().RoleBindings(idNS).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				found = append(found, "RoleBinding "+name)
			}
		}
		return found
	}
}

// appliedRecord decodes the record wrangler's apply keeps of what it applied (gzip, base64).
func appliedRecord(annotation string) string {
	b, err := base64.RawStdEncoding.DecodeString(annotation)
	Expect(err).NotTo(HaveOccurred())
	r, err := gzip.NewReader(bytes.NewReader(b))
	Expect(err).NotTo(HaveOccurred())
	out, err := io.ReadAll(r)
	Expect(err).NotTo(HaveOccurred())
	return string(out)
}

func updateBundleValue(name, value string) error {
	b, err := api.Bundle().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	b.Spec.Resources[0].Content = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  value: " + value + "\n"
	_, err = api.Bundle().Update(b)
	return err
}
