package agent_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

	It("reads both sources of a valuesFrom entry naming a ConfigMap and a Secret, the Secret's over the ConfigMap's", func(ctx context.Context) {
		name, ns := unique("both-sources"), unique("both-ns")
		_, err := local.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = local.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
			Data: map[string]string{"values.yaml": "color: blue\nsize: small\n"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = local.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hidden"},
			Data: map[string][]byte{"values.yaml": []byte("password: s3cret\nsize: large\n")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{
				Chart: "chart",
				ValuesFrom: []fleet.ValuesFrom{{
					ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "plain"},
					SecretKeyRef:    &fleet.SecretKeySelector{Name: "hidden"},
				}},
			}},
			Resources: []fleet.BundleResource{
				res("chart/Chart.yaml", "apiVersion: v2\nname: both\nversion: 0.1.0\n"),
				res("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: merged\ndata:\n"+
					"  color: {{ .Values.color | quote }}\n  size: {{ .Values.size | quote }}\n  password: {{ .Values.password | quote }}\n"),
			},
		})
		readyAndCurrent(name)
		Expect(cmData(ns, "merged")()).To(Equal(map[string]string{"color": "blue", "size": "large", "password": "s3cret"}))
	})

	It("removes the release a bundle left behind by a namespace change or a rename within the GC interval", func(ctx context.Context) {
		name, first, second := unique("moving"), unique("moving-ns"), unique("moving-ns")
		chart := []fleet.BundleResource{
			res("chart/Chart.yaml", "apiVersion: v2\nname: moving\nversion: 0.1.0\n"),
			res("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  a: \"1\"\n"),
		}
		newBundle(name, fleet.BundleSpec{Resources: chart, BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			DefaultNamespace: first, Helm: &fleet.HelmOptions{Chart: "chart", ReleaseName: "before"}}})
		Expect(readyAndCurrent(name).Status.Release).To(Equal(first + "/before:1"))
		Expect(cmData(first, "before-cm")()).NotTo(BeNil())
		releases := func(ns string) func() []string {
			return func() []string {
				list, err := driver.NewSecrets(local.CoreV1().Secrets(ns)).List(func(*release.Release) bool { return true })
				Expect(err).NotTo(HaveOccurred())
				var out []string
				for _, r := range list {
					out = append(out, r.Name)
				}
				return out
			}
		}

		By("a namespace change")
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.DefaultNamespace = second })
		Eventually(func() string { return readyAndCurrent(name).Status.Release }).Should(Equal(second + "/before:1"))
		// The suite's agent collects every 5s, as the chart's garbageCollectionInterval sets it.
		Eventually(releases(first)).Should(BeEmpty())
		Eventually(cmData(first, "before-cm")).Should(BeNil())
		Expect(cmData(second, "before-cm")()).NotTo(BeNil())

		By("a rename")
		updateBundle(name, func(b *fleet.Bundle) { b.Spec.Helm.ReleaseName = "after" })
		Eventually(func() string { return readyAndCurrent(name).Status.Release }).Should(Equal(second + "/after:1"))
		Eventually(releases(second)).Should(Equal([]string{"after"}))
		Eventually(cmData(second, "before-cm")).Should(BeNil())
		Expect(cmData(second, "after-cm")()).NotTo(BeNil())
		Consistently(releases(second), "6s").Should(Equal([]string{"after"}), "the current release stays")
	})

	It("keeps a field comparePatches ignore at its modified value when forceSyncGeneration redeploys, and deploys the chart's own change of it", func(ctx context.Context) {
		name, ns := unique("scaled-keep"), unique("scaled-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{
				APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "scaled", JSONPointers: []string{"/spec/replicas"},
			}}}},
			Resources: []fleet.BundleResource{res("deploy.yaml", deployment("scaled", ""))},
		})
		readyAndCurrent(name)
		replicas := func() int32 {
			d, err := local.AppsV1().Deployments(ns).Get(ctx, "scaled", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return *d.Spec.Replicas
		}
		// What an autoscaler does.
		_, err := local.AppsV1().Deployments(ns).Patch(ctx, "scaled", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())

		for _, revision := range []string{":2", ":3"} {
			updateBundle(name, func(b *fleet.Bundle) { b.Spec.ForceSyncGeneration++ })
			Eventually(func() string { return bd(name).Status.Release }).Should(HaveSuffix(revision), "the forced redeploy ran")
			Consistently(replicas, "3s").Should(Equal(int32(2)), "the ignored field kept its modified value (revision %s)", revision)
		}

		updateBundle(name, func(b *fleet.Bundle) {
			b.Spec.Resources = []fleet.BundleResource{res("deploy.yaml", strings.Replace(deployment("scaled", ""), "replicas: 1", "replicas: 3", 1))}
		})
		Eventually(func() string { return bd(name).Status.Release }).Should(HaveSuffix(":4"))
		Expect(replicas()).To(Equal(int32(3)), "a change the chart makes is deployed")
	})
})
