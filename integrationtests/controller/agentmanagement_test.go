package controller_test

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/agentmanifest"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/controller/agentmanagement"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// The manager manages agents as Fleet does: a Cluster whose agent checked in gets the agent's
// own Bundle, shaped by the configuration and the Cluster's agent settings, and its status says
// what the agent was given and whether it runs it.
var _ = Describe("agent management", Ordered, func() {
	var (
		oapi  fleetcontrollers.Interface
		okube kubernetes.Interface
	)
	const (
		ns   = fleet.DefaultNamespace
		name = "edge"
	)
	conf := config.Config{APIServerURL: "https://manager.example:6443", APIServerCA: "not-a-real-ca"}

	BeforeAll(func(ctx context.Context) {
		cl, a, err := testenv.StartWithCRDs(ctx, "agentmgmt")
		Expect(err).NotTo(HaveOccurred())
		oapi = a
		DeferCleanup(cl.Stop)
		okube, err = kubernetes.NewForConfig(cl.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		stop := testenv.RunController(cl.RESTConfig(), conf, controller.Options{ManageAgents: true, AgentImage: "registry.local/fleet:mgmt"})
		DeferCleanup(func() {
			Expect(stop()).To(Succeed())
		})
		cm, err := conf.ConfigMap("cattle-fleet-system")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			_, err := okube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}).Should(Succeed())
	})

	// deployment reads the agent's Deployment out of its Bundle.
	deployment := func(g Gomega) (*fleet.Bundle, *appsv1.Deployment, string) {
		b, err := oapi.Bundle().Get(ns, agentmanagement.BundleName(name), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Spec.Resources).To(HaveLen(1))
		manifest := b.Spec.Resources[0].Content
		var d *appsv1.Deployment
		for _, doc := range strings.Split(manifest, "---\n") {
			if strings.Contains(doc, "kind: Deployment") {
				d = &appsv1.Deployment{}
				g.Expect(yaml.Unmarshal([]byte(doc), d)).To(Succeed())
			}
		}
		g.Expect(d).NotTo(BeNil(), manifest)
		return b, d, manifest
	}
	cluster := func(g Gomega) *fleet.Cluster {
		c, err := oapi.Cluster().Get(ns, name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	// applyAgentBundle does what the agent does once it deployed its Bundle.
	applyAgentBundle := func(g Gomega) {
		c := cluster(g)
		bd, err := oapi.BundleDeployment().Get(c.Status.Namespace, agentmanagement.BundleName(name), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		bd.Status.AppliedDeploymentID = bd.Spec.DeploymentID
		_, err = oapi.BundleDeployment().UpdateStatus(bd)
		g.Expect(err).NotTo(HaveOccurred())
	}

	It("gives no Bundle to a Cluster whose agent never checked in, and one shaped by the Cluster's agent settings once it has", func() {
		yes := true
		_, err := oapi.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: fleet.ClusterSpec{
			AgentTolerations: []corev1.Toleration{{Key: "edge-only", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			AgentEnvVars:     []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"}},
			PrivateRepoURL:   "mirror.example",
			HostNetwork:      &yes,
			AgentPullSecrets: []corev1.LocalObjectReference{{Name: "mirror-pull"}},
			AgentResources:   &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("300Mi")}},
			AgentSchedulingCustomization: &fleet.AgentSchedulingCustomization{
				PriorityClass:       &fleet.PriorityClassSpec{Value: 1000},
				PodDisruptionBudget: &fleet.PodDisruptionBudgetSpec{MinAvailable: "1"}},
		}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) { g.Expect(cluster(g).Status.Namespace).NotTo(BeEmpty()) }).Should(Succeed())
		// The Cluster's changes (its namespace above) went through the handler: still no Bundle.
		Consistently(func() bool {
			_, err := oapi.Bundle().Get(ns, agentmanagement.BundleName(name), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 3*time.Second, 250*time.Millisecond).Should(BeTrue(), "no agent has checked in yet")

		Eventually(func() error {
			c, err := oapi.Cluster().Get(ns, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Status.Agent = fleet.AgentStatus{LastSeen: metav1.Now(), Namespace: "cattle-fleet-system"}
			_, err = oapi.Cluster().UpdateStatus(c)
			return err
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			b, d, manifest := deployment(g)
			g.Expect(b.Spec.Targets).To(Equal([]fleet.BundleTarget{{ClusterName: name}}))
			g.Expect(b.Spec.DefaultNamespace).To(Equal("cattle-fleet-system"))
			g.Expect(b.Spec.KeepResources).To(BeTrue())
			g.Expect(b.Spec.Helm.TakeOwnership).To(BeTrue())
			g.Expect(b.OwnerReferences).To(HaveLen(1))
			g.Expect(b.OwnerReferences[0].Name).To(Equal(name))
			g.Expect(d.Namespace).To(Equal("cattle-fleet-system"))
			pod := d.Spec.Template.Spec
			g.Expect(pod.Containers[0].Image).To(Equal("mirror.example/registry.local/fleet:mgmt"))
			g.Expect(pod.Containers[0].Args).To(ContainElements("--checkin-interval=15m0s", "--gc-interval=15m0s", "--agent-tls-mode=system-store"))
			g.Expect(pod.Containers[0].Env).To(ContainElements(
				corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"},
				corev1.EnvVar{Name: "FLEET_API_SERVER_URL", Value: conf.APIServerURL}))
			g.Expect(pod.Containers[0].Resources.Limits.Memory().String()).To(Equal("300Mi"))
			g.Expect(pod.Tolerations).To(ContainElement(corev1.Toleration{Key: "edge-only", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
			g.Expect(pod.HostNetwork).To(BeTrue())
			g.Expect(pod.ImagePullSecrets).To(ContainElement(corev1.LocalObjectReference{Name: "mirror-pull"}))
			g.Expect(pod.PriorityClassName).To(Equal(agentmanifest.PriorityClassName))
			g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(agentmanifest.GenerationAnnotation, "0"))
			g.Expect(manifest).To(ContainSubstring("kind: PriorityClass"))
			g.Expect(manifest).To(ContainSubstring("kind: PodDisruptionBudget"))
		}).Should(Succeed())
	})

	It("reports what the agent was given, and that it does not run it until its BundleDeployment is applied", func() {
		Eventually(func(g Gomega) {
			s := cluster(g).Status
			g.Expect(s.APIServerURL).To(Equal(conf.APIServerURL))
			g.Expect(s.APIServerCAHash).NotTo(BeEmpty())
			g.Expect(s.AgentTLSMode).To(Equal("system-store"))
			g.Expect(s.GarbageCollectionInterval).To(Equal(&metav1.Duration{Duration: 15 * time.Minute}))
			g.Expect(s.AgentPrivateRepoURL).To(Equal("mirror.example"))
			g.Expect(s.AgentHostNetwork).To(BeTrue())
			for _, h := range []string{s.AgentEnvVarsHash, s.AgentTolerationsHash, s.AgentResourcesHash, s.AgentSchedulingCustomizationHash} {
				g.Expect(h).NotTo(BeEmpty())
			}
			g.Expect(s.AgentAffinityHash).To(BeEmpty(), "no agentAffinity set")
			g.Expect(s.AgentMigrated && s.AgentNamespaceMigrated && s.CattleNamespaceMigrated).To(BeTrue())
			g.Expect(s.AgentConfigChanged).To(BeTrue())
			g.Expect(s.AgentDeployedGeneration).To(BeNil())
		}).Should(Succeed())
		Eventually(applyAgentBundle).Should(Succeed())
		Eventually(func(g Gomega) {
			s := cluster(g).Status
			g.Expect(s.AgentConfigChanged).To(BeFalse())
			g.Expect(s.AgentDeployedGeneration).To(HaveValue(BeEquivalentTo(0)))
		}).Should(Succeed())
	})

	It("re-renders every agent when the configuration changes", func(ctx context.Context) {
		changed := conf
		changed.AgentCheckinInterval = metav1.Duration{Duration: 42 * time.Second}
		changed.AgentTLSMode = "strict"
		cm, err := changed.ConfigMap("cattle-fleet-system")
		Expect(err).NotTo(HaveOccurred())
		_, err = okube.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			_, d, _ := deployment(g)
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--checkin-interval=42s", "--agent-tls-mode=strict"))
			s := cluster(g).Status
			g.Expect(s.AgentTLSMode).To(Equal("strict"))
			g.Expect(s.AgentConfigChanged).To(BeTrue(), "the agent has not deployed the new configuration yet")
		}).Should(Succeed())
		Eventually(applyAgentBundle).Should(Succeed())
		Eventually(func(g Gomega) { g.Expect(cluster(g).Status.AgentConfigChanged).To(BeFalse()) }).Should(Succeed())
	})

	It("redeploys the agent when spec.redeployAgentGeneration is raised, and reports the generation once deployed", func() {
		Eventually(func() error {
			c, err := oapi.Cluster().Get(ns, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Spec.RedeployAgentGeneration = 3
			_, err = oapi.Cluster().Update(c)
			return err
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			b, d, _ := deployment(g)
			g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(agentmanifest.GenerationAnnotation, "3"))
			g.Expect(b.Labels).To(HaveKeyWithValue(agentmanagement.GenerationLabel, "3"))
			bd, err := oapi.BundleDeployment().Get(cluster(g).Status.Namespace, b.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bd.Labels).To(HaveKeyWithValue(agentmanagement.GenerationLabel, "3"))
		}).Should(Succeed())
		Eventually(applyAgentBundle).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(cluster(g).Status.AgentDeployedGeneration).To(HaveValue(BeEquivalentTo(3)))
		}).Should(Succeed())
	})

	// A tenant who may write Bundles in a restricted namespace forges the agent's own Bundle of a
	// Cluster (its name, the managed label, an owner reference to the Cluster's UID) holding a
	// cluster-admin ClusterRoleBinding: it is bound by the restriction like any other Bundle,
	// while the Cluster's agent has not checked in and after, and the manager writes its own
	// Bundle back over the forgery once it manages the agent.
	It("exempts from GitRepoRestrictions only the agent Bundle the manager wrote, not a forgery of it", func(ctx context.Context) {
		const tns, victim = "tenant-forge", "victim"
		_, err := okube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = oapi.GitRepoRestriction().Create(&fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: tns},
			AllowedTargetNamespaces: []string{"team-apps"}})
		Expect(err).NotTo(HaveOccurred())
		c, err := oapi.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: victim, Namespace: tns}})
		Expect(err).NotTo(HaveOccurred())
		var clusterNS string
		Eventually(func(g Gomega) {
			cur, err := oapi.Cluster().Get(tns, victim, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			clusterNS = cur.Status.Namespace
			g.Expect(clusterNS).NotTo(BeEmpty())
		}).Should(Succeed())
		const crb = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: tenant-admin\n" +
			"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\n" +
			"subjects:\n- kind: User\n  name: tenant\n  apiGroup: rbac.authorization.k8s.io\n"
		forged := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: agentmanagement.BundleName(victim), Namespace: tns,
			Labels:          map[string]string{fleet.ManagedLabel: "true"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, fleet.SchemeGroupVersion.WithKind("Cluster"))}},
			Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "cattle-fleet-system"},
				Resources: []fleet.BundleResource{{Name: "agent.yaml", Content: crb}},
				Targets:   []fleet.BundleTarget{{ClusterName: victim}}}}
		_, err = oapi.Bundle().Create(forged)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			b, err := oapi.Bundle().Get(tns, forged.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			cond := fleet.FindCondition(b.Status.Conditions, fleet.ConditionAccepted)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal("Restricted"))
			g.Expect(cond.Message).To(ContainSubstring("GitRepoRestriction team"))
		}).Should(Succeed())
		_, err = oapi.BundleDeployment().Get(clusterNS, forged.Name, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a forged agent Bundle is not deployed: %v", err)

		// The agent checks in: the manager writes its own Bundle over the forgery, and that
		// one is exempt (deployed to the agent's namespace although the restriction allows
		// only team-apps).
		Eventually(func() error {
			cur, err := oapi.Cluster().Get(tns, victim, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Status.Agent = fleet.AgentStatus{LastSeen: metav1.Now(), Namespace: "cattle-fleet-system"}
			_, err = oapi.Cluster().UpdateStatus(cur)
			return err
		}).Should(Succeed())
		var deployed string
		Eventually(func(g Gomega) {
			bd, err := oapi.BundleDeployment().Get(clusterNS, forged.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bd.Labels).To(HaveKey(agentmanagement.ConfigHashLabel))
			deployed = bd.Spec.DeploymentID
			g.Expect(deployed).NotTo(BeEmpty())
			b, err := oapi.Bundle().Get(tns, forged.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Spec.Resources[0].Content).NotTo(ContainSubstring("tenant-admin"))
		}).Should(Succeed())

		// A tenant's change to the manager's Bundle is written back, and never deployed.
		Eventually(func() error {
			b, err := oapi.Bundle().Get(tns, forged.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.Spec.Resources = append(b.Spec.Resources, fleet.BundleResource{Name: "crb.yaml", Content: crb})
			_, err = oapi.Bundle().Update(b)
			return err
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			b, err := oapi.Bundle().Get(tns, forged.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Spec.Resources).To(HaveLen(1), "the manager's Bundle is written back")
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			bd, err := oapi.BundleDeployment().Get(clusterNS, forged.Name, metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bd.Spec.DeploymentID).To(Equal(deployed), "the changed Bundle is not deployed")
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	})
})
