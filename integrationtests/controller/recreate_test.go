package controller_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

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
