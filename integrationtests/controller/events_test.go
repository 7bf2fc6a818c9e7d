package controller_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// agentReports writes what an agent reports, as the agent does: a change to the BundleDeployment's status.
func agentReports(bd *fleet.BundleDeployment, change func(*fleet.BundleDeploymentStatus)) {
	Eventually(func() error {
		cur, err := api.BundleDeployment().Get(bd.Namespace, bd.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&cur.Status)
		_, err = api.BundleDeployment().UpdateStatus(cur)
		return err
	}).Should(Succeed())
}

var _ = It("records Events for a BundleDeployment: deployed, drift detected, drift corrected, deploy failed", func(ctx context.Context) {
	ns := newNamespace(ctx)
	newCluster(ns, "ev", nil)
	keepCheckingIn(ns, "ev")
	newBundle(ns, "ev-app", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "ev"}}})
	var bd *fleet.BundleDeployment
	Eventually(func(g Gomega) {
		bd = deployments(ns, "ev-app")["ev"]
		g.Expect(bd).NotTo(BeNil())
		g.Expect(bd.Spec.DeploymentID).NotTo(BeEmpty())
	}).Should(Succeed())
	events := func(g Gomega) map[string][]string {
		ev, err := testenv.Events(ctx, kube, bd.Namespace, "BundleDeployment", "ev-app")
		g.Expect(err).NotTo(HaveOccurred())
		return ev
	}

	agentReports(bd, func(s *fleet.BundleDeploymentStatus) {
		s.AppliedDeploymentID, s.Release, s.Ready, s.NonModified = bd.Spec.DeploymentID, "default/ev-app:1", true, true
		fleet.SetCondition(&s.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", time.Now())
	})
	Eventually(func(g Gomega) { g.Expect(events(g)["Deployed"]).To(ContainElement("release default/ev-app:1")) }).Should(Succeed())

	agentReports(bd, func(s *fleet.BundleDeploymentStatus) {
		s.NonModified = false
		s.ModifiedStatus = []fleet.ModifiedStatus{{Kind: "ConfigMap", Namespace: "default", Name: "ev", Exist: true, Patch: `{"data":{"a":"1"}}`}}
	})
	Eventually(func(g Gomega) {
		g.Expect(events(g)["DriftDetected"]).To(ContainElement("modified: ConfigMap default/ev changed"))
	}).Should(Succeed())

	agentReports(bd, func(s *fleet.BundleDeploymentStatus) {
		s.NonModified, s.ModifiedStatus, s.Release = true, nil, "default/ev-app:2"
	})
	Eventually(func(g Gomega) {
		ev := events(g)
		g.Expect(ev["DriftCorrected"]).To(ContainElement(ContainSubstring("default/ev-app:2")))
		g.Expect(ev["Deployed"]).To(HaveLen(1), "a correction is not a deployment")
	}).Should(Succeed())

	updateBundle(ns, "ev-app", func(b *fleet.Bundle) { b.Spec.DefaultNamespace = "elsewhere" })
	Eventually(func() string { return deployments(ns, "ev-app")["ev"].Spec.Options.DefaultNamespace }).Should(Equal("elsewhere"))
	agentReports(bd, func(s *fleet.BundleDeploymentStatus) {
		fleet.SetCondition(&s.Conditions, fleet.ConditionDeployed, corev1.ConditionFalse, "Error", "namespace elsewhere is not allowed", time.Now())
	})
	Eventually(func(g Gomega) {
		g.Expect(events(g)["DeployFailed"]).To(ContainElement("namespace elsewhere is not allowed"))
	}).Should(Succeed())
})
