package registration_test

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The fleet chart's ignoreClusterRegistrationLabels, through the configuration the controller
// reloads: a Cluster made for a registration then takes none of the agent's labels.
var _ = It("gives a registering agent's labels to no Cluster when the configuration says ignoreClusterRegistrationLabels", func() {
	// (Not the spec's context: the cleanup that turns it off again runs after that ends.)
	ctx := context.Background()
	cms := managerKube.CoreV1().ConfigMaps(systemNS)
	setIgnore := func(ignore bool) {
		GinkgoHelper()
		Eventually(func() error {
			cm, err := cms.Get(ctx, config.ConfigMapName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var doc map[string]any
			if err := json.Unmarshal([]byte(cm.Data[config.Key]), &doc); err != nil {
				return err
			}
			doc["ignoreClusterRegistrationLabels"] = ignore
			data, err := json.Marshal(doc)
			if err != nil {
				return err
			}
			cm.Data[config.Key] = string(data)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}).Should(Succeed())
		Eventually(func() bool { return inForce.Get().IgnoreClusterRegistrationLabels }).Should(Equal(ignore))
	}
	setIgnore(true)
	DeferCleanup(setIgnore, false)

	const id = "ignore-labels-client"
	_, err := api.ClusterRegistration().Create(&fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: "request-ignore-labels", Namespace: fleet.DefaultNamespace},
		Spec:       fleet.ClusterRegistrationSpec{ClientID: id, ClientRandom: "r1", ClusterLabels: map[string]string{"env": "from-agent"}}})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		c, err := api.Cluster().Get(fleet.DefaultNamespace, registration.ClusterName(id), metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Labels).NotTo(HaveKey("env"))
		g.Expect(c.Spec.ClientID).To(Equal(id))
	}).Should(Succeed())
	DeferCleanup(func() {
		_ = api.Cluster().Delete(fleet.DefaultNamespace, registration.ClusterName(id), nil)
	})
})
