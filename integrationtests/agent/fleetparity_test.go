package agent_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Outcomes Fleet's own end-to-end scenarios look at.
var _ = Describe("agent, as Fleet's scenarios see it", func() {
	It("reports a chart or bundle that renders no resources Ready and unmodified once deployed", func() {
		chart, raw, ns := unique("nothing-chart"), unique("nothing-raw"), unique("nothing-ns")
		newBundle(chart, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{Chart: "chart"}},
			Resources: []fleet.BundleResource{
				res("chart/Chart.yaml", "apiVersion: v2\nname: off\nversion: 0.1.0\n"),
				res("chart/values.yaml", "enabled: false\n"),
				res("chart/templates/cm.yaml", "{{- if .Values.enabled }}\n"+configMap("never")+"{{- end }}\n"),
			},
		})
		newBundle(raw, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("empty.yaml", "# nothing here yet\n")},
		})
		for _, name := range []string{chart, raw} {
			b := readyAndCurrent(name)
			Expect(b.Status.Ready).To(BeTrue(), name)
			Expect(b.Status.NonModified).To(BeTrue(), name)
			Expect(*condition(b, "Monitored")).To(Equal(corev1.ConditionTrue), name)
			Expect(*condition(b, "Ready")).To(Equal(corev1.ConditionTrue), name)
		}
	})
})
