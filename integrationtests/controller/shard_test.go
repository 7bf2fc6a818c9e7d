package controller_test

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// managers are the shards whose controllers wrote obj (subresource "" for the object itself,
// "status" for its status), by the field manager a shard's writes carry (fleet-shard-ID): "a",
// "b", and "" for any other writer (the suite's unsharded controller).
func managers(obj metav1.Object, subresource string) map[string]bool {
	out := map[string]bool{}
	for _, m := range obj.GetManagedFields() {
		if m.Subresource != subresource {
			continue
		}
		id, sharded := strings.CutPrefix(m.Manager, "fleet-shard-")
		if !sharded {
			id = ""
		}
		out[id] = true
	}
	return out
}

var _ = Describe("sharding", func() {
	It("hands each shard's Bundles and BundleDeployments to its controller alone, unlabelled ones and Clusters to the unsharded controller", func(ctx context.Context) {
		// Two shards beside the suite's unsharded controller, as `fleet controller --shard-id`
		// runs them. Each shard's writes carry its field manager name.
		for _, id := range []string{"a", "b"} {
			stop := testenv.RunController(cluster.RESTConfig(), config.Config{}, controller.Options{ShardID: id, Config: inForce})
			DeferCleanup(func() { Expect(stop()).To(Succeed()) })
		}
		ns := newNamespace(ctx)
		newCluster(ns, "one", map[string]string{"env": "shard"})
		newCluster(ns, "two", map[string]string{"env": "shard"})
		keepCheckingIn(ns, "one", "two")
		shardOf := map[string]string{"in-a": "a", "in-b": "b", "unlabelled": ""}
		for name, id := range shardOf {
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: " + name + "\n"}},
					Targets: []fleet.BundleTarget{{ClusterSelector: sel("env", "shard")}}}}
			if id != "" {
				b.Labels = map[string]string{fleet.ShardLabel: id}
			}
			_, err := api.Bundle().Create(b)
			Expect(err).NotTo(HaveOccurred())
		}
		for name, id := range shardOf {
			Eventually(clusterNames(ns, name)).Should(Equal([]string{"one", "two"}), name)
			for _, bd := range deployments(ns, name) {
				// The label goes with the BundleDeployment, and only its shard wrote it.
				Expect(bd.Labels[fleet.ShardLabel]).To(Equal(id))
				Expect(managers(bd, "")).To(Equal(map[string]bool{id: true}), "writers of %s/%s", bd.Namespace, bd.Name)
				agentDeploys(bd, true)
			}
			Eventually(func() string { return bundleStatus(ns, name)().Display.ReadyClusters }).Should(Equal("2/2"), name)
			b, err := api.Bundle().Get(ns, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(managers(b, "status")).To(Equal(map[string]bool{id: true}), "status writers of bundle %s", name)
		}
		// Clusters are the unsharded controller's: it counts every shard's deployments.
		Eventually(func() string {
			c, err := api.Cluster().Get(ns, "one", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return c.Status.Display.ReadyBundles
		}).Should(Equal("3/3"))
		c, err := api.Cluster().Get(ns, "one", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(managers(c, "status")).To(Equal(map[string]bool{"": true}))

		By("each controller records the deployment history of its own Bundles")
		for name := range shardOf {
			Eventually(func() []string { return recordOf(ns, name).Clusters }, time.Minute).Should(ConsistOf("one", "two"), name)
		}
	})
})
