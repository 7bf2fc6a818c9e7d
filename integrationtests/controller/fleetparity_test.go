package controller_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Outcomes Fleet's own end-to-end scenarios look at.
var _ = Describe("a Bundle deleted and created again under the same name", func() {
	It("gets its BundleDeployments again at once", func(ctx context.Context) {
		ns := newNamespace(ctx)
		var names []string
		for i := range 12 {
			names = append(names, fmt.Sprintf("c%02d", i))
			newCluster(ns, names[i], map[string]string{"env": "test"})
		}
		keepCheckingIn(ns, names...)
		bundles := []string{"one", "two", "three"}
		spec := fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "test")}}}
		for round := range 3 {
			By(fmt.Sprintf("round %d: creating the Bundles", round))
			for _, b := range bundles {
				newBundle(ns, b, spec)
			}
			for _, b := range bundles {
				// The suite's default deadline (30s) is far below the 5 minutes a stale
				// record of created deployments held the Bundle back.
				Eventually(clusterNames(ns, b)).Should(Equal(names), "bundle %s", b)
			}
			By(fmt.Sprintf("round %d: deleting them", round))
			for _, b := range bundles {
				Expect(api.Bundle().Delete(ns, b, &metav1.DeleteOptions{})).To(Succeed())
			}
			for _, b := range bundles {
				Eventually(func() bool {
					_, err := api.Bundle().Get(ns, b, metav1.GetOptions{})
					return apierrors.IsNotFound(err)
				}).Should(BeTrue())
				Eventually(clusterNames(ns, b)).Should(BeEmpty())
			}
		}
	})
})

var _ = Describe("a Bundle whose targets cannot be evaluated", func() {
	It("says so in Fleet's words: the Ready message starts with \"targeting error: \"", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "edge", nil)
		bogus := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}
		newBundle(ns, "mistargeted", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterSelector: bogus}}})
		Eventually(func(g Gomega) {
			c := fleet.FindCondition(bundleStatus(ns, "mistargeted")().Conditions, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(HavePrefix("targeting error: "))
			g.Expect(c.Message).To(ContainSubstring("targets[0].clusterSelector"))
		}).Should(Succeed())
	})
})
