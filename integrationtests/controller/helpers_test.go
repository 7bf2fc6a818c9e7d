package controller_test

import (
	"context"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func newNamespace(ctx context.Context) string {
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctrl-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return ns.Name
}

// newCluster creates a Cluster that has checked in, and waits for its namespace. It is deleted
// after the spec: past 100 Clusters the manager spaces its roll-ups out as a large installation
// does (cluster.smallInstallation), and the suite's specs are timed for a small one.
func newCluster(ns, name string, lbls map[string]string) *fleet.Cluster {
	c, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if err := api.Cluster().Delete(ns, name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	})
	Eventually(func() string {
		c, err = api.Cluster().Get(ns, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return c.Status.Namespace
	}).ShouldNot(BeEmpty())
	checkIn(ns, name)
	return c
}

// labelNamespace sets the label key=value on the namespace ns.
func labelNamespace(ctx context.Context, ns, key, value string) {
	obj, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	obj.Labels[key] = value
	_, err = kube.CoreV1().Namespaces().Update(ctx, obj, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// checkIn does what an agent's heartbeat does.
func checkIn(ns, name string) {
	Eventually(func() error {
		c, err := api.Cluster().Get(ns, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Agent.LastSeen = metav1.Now()
		_, err = api.Cluster().UpdateStatus(c)
		return err
	}).Should(Succeed())
}

// keepCheckingIn does what the agents' heartbeats do, every second until the spec ends (or its
// agents stop: the cancel returned): a spec taking longer than three check-in intervals (6s
// here) would otherwise see its clusters Offline.
func keepCheckingIn(ns string, names ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			for _, name := range names {
				if c, err := api.Cluster().Get(ns, name, metav1.GetOptions{}); err == nil {
					c.Status.Agent.LastSeen = metav1.Now()
					_, _ = api.Cluster().UpdateStatus(c)
				}
			}
		}
	}()
	return cancel
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func newBundle(ns, name string, spec fleet.BundleSpec) {
	if len(spec.Resources) == 0 {
		spec.Resources = []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: " + name + "\n"}}
	}
	_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec})
	Expect(err).NotTo(HaveOccurred())
}

func updateBundle(ns, name string, mutate func(*fleet.Bundle)) {
	Expect(testenv.UpdateBundle(api, ns, name, mutate)).To(Succeed())
}

// deployments returns the bundle's BundleDeployments by cluster name.
func deployments(ns, bundle string) map[string]*fleet.BundleDeployment {
	sel := labels.SelectorFromSet(labels.Set{fleet.BundleNamespaceLabel: ns, fleet.BundleLabel: bundle})
	list, err := api.BundleDeployment().List("", metav1.ListOptions{LabelSelector: sel.String()})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]*fleet.BundleDeployment{}
	for i := range list.Items {
		bd := &list.Items[i]
		out[bd.Labels[fleet.ClusterLabel]] = bd
	}
	return out
}

func clusterNames(ns, bundle string) func() []string {
	return func() []string {
		var names []string
		for c := range deployments(ns, bundle) {
			names = append(names, c)
		}
		sort.Strings(names)
		return names
	}
}

// agentDeploys writes what an agent reports after deploying the current deploymentID.
func agentDeploys(bd *fleet.BundleDeployment, ready bool) {
	Eventually(func() error {
		cur, err := api.BundleDeployment().Get(bd.Namespace, bd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.AppliedDeploymentID = cur.Spec.DeploymentID
		cur.Status.Ready = ready
		cur.Status.NonModified = true
		fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", time.Now())
		_, err = api.BundleDeployment().UpdateStatus(cur)
		return err
	}).Should(Succeed())
}

func bundleStatus(ns, name string) func() fleet.BundleStatus {
	return func() fleet.BundleStatus {
		b, err := api.Bundle().Get(ns, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return b.Status
	}
}
