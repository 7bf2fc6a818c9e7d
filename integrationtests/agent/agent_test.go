package agent_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("agent", func() {
	It("deploys raw manifests, reports them Ready and checks in", func(ctx context.Context) {
		name, ns := unique("raw"), unique("raw-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("cm.yaml", configMap("app-config", "color", "blue")), res("deploy.yaml", deployment("app", ""))},
		})
		b := readyAndCurrent(name)
		Expect(b.Status.Release).To(Equal(ns + "/" + name + ":1"))
		Expect(b.Status.Ready).To(BeTrue())
		Expect(b.Status.NonModified).To(BeTrue())
		Expect(b.Status.ResourceCounts).NotTo(BeNil())
		Expect(b.Status.ResourceCounts.DesiredReady).To(Equal(2))
		Expect(b.Status.ResourceCounts.Ready).To(Equal(2))
		Expect(b.Status.Resources).To(HaveLen(2))
		Expect(*condition(b, "Deployed")).To(Equal(corev1.ConditionTrue))
		Expect(*condition(b, "Installed")).To(Equal(corev1.ConditionTrue))
		Expect(*condition(b, "Monitored")).To(Equal(corev1.ConditionTrue))
		Expect(cmData(ns, "app-config")()).To(HaveKeyWithValue("color", "blue"))
		d, err := local.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Status.AvailableReplicas).To(Equal(int32(1)))

		c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Status.Agent.LastSeen.Time).To(BeTemporally("~", time.Now(), time.Minute))
		Expect(c.Status.Agent.Namespace).To(Equal(agentNS))
		Expect(c.Status.Agent.ReadyNodes).To(Equal(1))
	})

	It("reports a Deployment NotReady, then Ready once it can run", func() {
		name, ns := unique("notready"), unique("notready-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("deploy.yaml", deployment("web", "nowhere: \"true\""))},
		})
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.NotReady)))
			g.Expect(b.Status.NonReadyStatus).To(ContainElement(And(
				HaveField("Kind", "Deployment"), HaveField("Name", "web"), HaveField("Namespace", ns))))
			g.Expect(b.Status.ResourceCounts.NotReady).To(Equal(1))
		}).Should(Succeed())
		updateBundle(name, func(b *fleet.Bundle) {
			b.Spec.Resources = []fleet.BundleResource{res("deploy.yaml", deployment("web", ""))}
		})
		b := readyAndCurrent(name)
		Expect(b.Status.NonReadyStatus).To(BeEmpty())
		Expect(b.Status.Release).To(HaveSuffix(":2"))
	})

	It("counts a Deployment whose manifest sets only strategy.type as not modified, as Fleet does", func() {
		name, ns := unique("strategy"), unique("strategy-ns")
		manifest := strings.Replace(deployment("web", ""), "spec:\n  replicas: 1\n", "spec:\n  replicas: 1\n  strategy:\n    type: RollingUpdate\n", 1)
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("deploy.yaml", manifest)},
		})
		b := readyAndCurrent(name)
		Expect(b.Status.NonModified).To(BeTrue(), "modified: %+v", b.Status.ModifiedStatus)
		Consistently(func() []fleet.ModifiedStatus { return bd(name).Status.ModifiedStatus }, "5s").Should(BeEmpty())
	})

	It("installs a Helm chart with per-cluster templated values and a release name", func() {
		name, ns := unique("chart"), unique("chart-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{
				Chart: "chart", ReleaseName: "my-release",
				Values: &fleet.GenericMap{Data: map[string]any{"who": "${ .ClusterName }-${ .ClusterLabels.env }"}},
			}},
			Resources: []fleet.BundleResource{
				res("chart/Chart.yaml", "apiVersion: v2\nname: demo\nversion: 0.1.0\n"),
				res("chart/values.yaml", "who: nobody\nsize: small\n"),
				res("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  who: {{ .Values.who | quote }}\n  size: {{ .Values.size | quote }}\n"),
			},
		})
		b := readyAndCurrent(name)
		Expect(b.Status.Release).To(Equal(ns + "/my-release:1"))
		Expect(cmData(ns, "my-release-cm")()).To(And(HaveKeyWithValue("who", clusterName+"-test"), HaveKeyWithValue("size", "small")))
	})

	It("lets chart templates look up names, as Fleet does, unless helm.disableDNS", func() {
		chart := []fleet.BundleResource{
			res("chart/Chart.yaml", "apiVersion: v2\nname: dns\nversion: 0.1.0\n"),
			res("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-dns\ndata:\n  ip: {{ getHostByName \"localhost\" | quote }}\n"),
		}
		on, off, ns := unique("dns-on"), unique("dns-off"), unique("dns-ns")
		newBundle(on, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
			Helm: &fleet.HelmOptions{Chart: "chart", ReleaseName: "on"}}, Resources: chart})
		newBundle(off, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
			Helm: &fleet.HelmOptions{Chart: "chart", ReleaseName: "off", DisableDNS: true}}, Resources: chart})
		readyAndCurrent(on)
		readyAndCurrent(off)
		Expect(cmData(ns, "on-dns")()).To(HaveKeyWithValue("ip", "127.0.0.1"))
		Expect(cmData(ns, "off-dns")()).To(HaveKeyWithValue("ip", ""))
	})

	It("post-renders with kustomize and applies yaml overlays", func() {
		kname, oname, ns := unique("kust"), unique("overlay"), unique("kust-ns")
		newBundle(kname, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{
				res("base.yaml", configMap("kcm", "from", "base")),
				res("kustomization.yaml", "resources:\n- base.yaml\nnamePrefix: prod-\ncommonLabels:\n  tier: prod\n"),
			},
		})
		newBundle(oname, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, YAML: &fleet.YAMLOptions{Overlays: []string{"edge"}}},
			Resources: []fleet.BundleResource{
				res("ocm.yaml", configMap("ocm", "from", "base")),
				res("overlays/edge/ocm_patch.yaml", "data:\n  from: edge\n"),
			},
		})
		readyAndCurrent(kname)
		readyAndCurrent(oname)
		Expect(cmData(ns, "prod-kcm")()).To(HaveKeyWithValue("from", "base"))
		cm, err := local.CoreV1().ConfigMaps(ns).Get(context.Background(), "prod-kcm", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Labels).To(HaveKeyWithValue("tier", "prod"))
		Expect(cmData(ns, "ocm")()).To(HaveKeyWithValue("from", "edge"))
	})

	It("redeploys when a valuesFrom ConfigMap changes", func(ctx context.Context) {
		name, ns := unique("valuesfrom"), unique("vf-ns")
		_, err := local.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = local.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "values"},
			Data: map[string]string{"values.yaml": "greeting: hi\n"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{
				Chart:      "chart",
				Values:     &fleet.GenericMap{Data: map[string]any{"greeting": "inline", "other": "inline"}},
				ValuesFrom: []fleet.ValuesFrom{{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "values"}}},
			}},
			Resources: []fleet.BundleResource{
				res("chart/Chart.yaml", "apiVersion: v2\nname: vf\nversion: 0.1.0\n"),
				res("chart/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  greeting: {{ .Values.greeting | quote }}\n  other: {{ .Values.other | quote }}\n"),
			},
		})
		readyAndCurrent(name)
		Expect(cmData(ns, "greeting")()).To(And(HaveKeyWithValue("greeting", "hi"), HaveKeyWithValue("other", "inline")))
		_, err = local.CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "values", Namespace: ns},
			Data: map[string]string{"values.yaml": "greeting: hello\n"}}, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(cmData(ns, "greeting")).Should(HaveKeyWithValue("greeting", "hello"))
		Eventually(func() string { return bd(name).Status.Release }).Should(HaveSuffix(":2"))
	})

	It("reports drift, then corrects it when correctDrift is enabled", func(ctx context.Context) {
		name, ns := unique("drift"), unique("drift-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("cm.yaml", configMap("drifty", "a", "1")), res("cm2.yaml", configMap("gone", "b", "2"))},
		})
		readyAndCurrent(name)
		patch := []byte(`{"data":{"a":"changed"}}`)
		_, err := local.CoreV1().ConfigMaps(ns).Patch(ctx, "drifty", types.MergePatchType, patch, metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(local.CoreV1().ConfigMaps(ns).Delete(ctx, "gone", metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.Modified)))
			g.Expect(b.Status.NonModified).To(BeFalse())
			g.Expect(b.Status.ModifiedStatus).To(ContainElement(And(HaveField("Name", "drifty"), HaveField("Exist", true),
				HaveField("Patch", ContainSubstring(`"a":"1"`)))))
			g.Expect(b.Status.ModifiedStatus).To(ContainElement(And(HaveField("Name", "gone"), HaveField("Create", true))))
			// Named as Fleet's summaries name them (kind.group namespace/name), which alerts match on.
			ready := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Message).To(ContainSubstring("configmap.v1 " + ns + "/drifty modified {"))
			g.Expect(ready.Message).To(ContainSubstring("configmap.v1 " + ns + "/gone missing"))
		}).Should(Succeed())
		// The agent's metrics: the drift is counted once it is found, no correction yet.
		Eventually(func(g Gomega) {
			f, err := testenv.Scrape(agentMetrics)
			g.Expect(err).NotTo(HaveOccurred())
			v, ok := f.Sample("fleet_agent_drift_detected_total", map[string]string{"bundledeployment": name})
			g.Expect(ok).To(BeTrue())
			g.Expect(v).To(BeNumerically(">=", 1))
			_, ok = f.Sample("fleet_agent_drift_corrected_total", map[string]string{"bundledeployment": name})
			g.Expect(ok).To(BeFalse())
			installs, _ := f.Sample("fleet_agent_deploy_duration_seconds", map[string]string{"action": "install"})
			g.Expect(installs).To(BeNumerically(">=", 1))
			age, ok := f.Sample("fleet_agent_checkin_age_seconds", nil)
			g.Expect(ok).To(BeTrue())
			g.Expect(age).To(BeNumerically("<", 30), "the agent checks in every 2s")
		}).Should(Succeed())

		updateBundle(name, func(b *fleet.Bundle) { b.Spec.CorrectDrift = &fleet.CorrectDrift{Enabled: true} })
		Eventually(cmData(ns, "drifty")).Should(HaveKeyWithValue("a", "1"))
		Eventually(cmData(ns, "gone")).Should(HaveKeyWithValue("b", "2"))
		b := readyAndCurrent(name)
		Expect(b.Status.ModifiedStatus).To(BeEmpty())
		Eventually(func(g Gomega) {
			f, err := testenv.Scrape(agentMetrics)
			g.Expect(err).NotTo(HaveOccurred())
			v, ok := f.Sample("fleet_agent_drift_corrected_total", map[string]string{"bundledeployment": name})
			g.Expect(ok).To(BeTrue())
			g.Expect(v).To(BeNumerically(">=", 1))
		}).Should(Succeed())
	})

	It("does not report a mutation that comparePatches ignore", func(ctx context.Context) {
		name, ns := unique("compare"), unique("compare-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{
				APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "scaled", JSONPointers: []string{"/spec/replicas"},
			}}}},
			Resources: []fleet.BundleResource{res("deploy.yaml", deployment("scaled", "")), res("cm.yaml", configMap("watched", "a", "1"))},
		})
		readyAndCurrent(name)
		// What an autoscaler does: ignored by the comparePatch.
		_, err := local.AppsV1().Deployments(ns).Patch(ctx, "scaled", types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The scale itself may show as NotReady until the new replica is available (more so on a busy
		// machine); what must never show is drift.
		Consistently(func(g Gomega) {
			b := bd(name)
			g.Expect(b.Status.ModifiedStatus).To(BeEmpty())
			g.Expect(b.Status.Display.State).NotTo(Equal(string(fleet.Modified)))
		}, 8*time.Second, 500*time.Millisecond).Should(Succeed())
		readyAndCurrent(name)
		// The same kind of change elsewhere is drift, so the check above could fail.
		_, err = local.CoreV1().ConfigMaps(ns).Patch(ctx, "watched", types.MergePatchType, []byte(`{"data":{"a":"2"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(state(name)).Should(Equal(string(fleet.Modified)))
		Expect(bd(name).Status.ModifiedStatus).To(ConsistOf(HaveField("Name", "watched")))
	})

	It("leaves out of drift the whole objects a comparePatch ignores (op: ignore)", func(ctx context.Context) {
		name, ns := unique("ignore"), unique("ignore-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{
				APIVersion: "v1", Kind: "ConfigMap", Name: "free", Operations: []fleet.Operation{{Op: "ignore"}},
			}}}},
			Resources: []fleet.BundleResource{res("free.yaml", configMap("free", "a", "1")), res("cm.yaml", configMap("watched", "a", "1"))},
		})
		readyAndCurrent(name)
		// Changed first, so every check that sees the second change sees this one too.
		_, err := local.CoreV1().ConfigMaps(ns).Patch(ctx, "free", types.MergePatchType, []byte(`{"data":{"a":"changed","b":"new"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = local.CoreV1().ConfigMaps(ns).Patch(ctx, "watched", types.MergePatchType, []byte(`{"data":{"a":"2"}}`), metav1.PatchOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(state(name)).Should(Equal(string(fleet.Modified)))
		Expect(bd(name).Status.ModifiedStatus).To(ConsistOf(HaveField("Name", "watched")))
	})

	It("copies downstreamResources from the bundle's namespace into the bundle's namespace downstream, and follows their changes", func(ctx context.Context) {
		name, ns := unique("copies"), unique("copies-ns")
		secret, cm := unique("creds"), unique("settings")
		mgr, err := manager.Clientset()
		Expect(err).NotTo(HaveOccurred())
		_, err = mgr.CoreV1().ConfigMaps(fleet.DefaultNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm,
			Annotations: map[string]string{"fleet.cattle.io/allowed-uses": "downstreamResources"}},
			Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, DownstreamResources: []fleet.DownstreamResource{
				{Kind: "ConfigMap", Name: cm}, {Kind: "Secret", Name: secret}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("app", "k", "v"))},
		})
		// The Secret does not exist yet: the deployment says which and waits.
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("downstreamResources[1]: Secret "+secret))))
		}).Should(Succeed())
		Expect(cmData(ns, "app")()).To(BeNil(), "nothing is deployed before every copy is there")
		// Annotated for the use, as the namespace's owner allows it (secretuse.UsesAnnotation).
		_, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret,
			Annotations: map[string]string{"fleet.cattle.io/allowed-uses": "downstreamResources"}},
			Data: map[string][]byte{"token": []byte("s3cret")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		readyAndCurrent(name)
		Expect(cmData(ns, cm)()).To(HaveKeyWithValue("mode", "fast"))
		secretData := func() map[string][]byte {
			s, err := local.CoreV1().Secrets(ns).Get(ctx, secret, metav1.GetOptions{})
			if err != nil {
				return nil
			}
			return s.Data
		}
		Expect(secretData()).To(HaveKeyWithValue("token", []byte("s3cret")))

		// A changed source reaches the cluster without touching the Bundle.
		src, err := mgr.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, secret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		src.Data["token"] = []byte("rotated")
		_, err = mgr.CoreV1().Secrets(fleet.DefaultNamespace).Update(ctx, src, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(secretData).Should(HaveKeyWithValue("token", []byte("rotated")))

		// The copies go with the bundle, as on Fleet, but a keepResources bundle's stay.
		kept, keptNS := unique("copies-kept"), unique("copies-kept-ns")
		newBundle(kept, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: keptNS, KeepResources: true,
				DownstreamResources: []fleet.DownstreamResource{{Kind: "ConfigMap", Name: cm}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("app", "k", "v"))},
		})
		readyAndCurrent(kept)
		Expect(cmData(keptNS, cm)()).To(HaveKeyWithValue("mode", "fast"))
		for _, b := range []string{name, kept} {
			Expect(api.Bundle().Delete(fleet.DefaultNamespace, b, nil)).To(Succeed())
		}
		Eventually(secretData).Should(BeNil(), "the Secret copy goes with its bundle")
		Eventually(cmData(ns, cm)).Should(BeNil(), "the ConfigMap copy goes with its bundle")
		Eventually(cmData(ns, "app")).Should(BeNil())
		Consistently(cmData(keptNS, cm), "3s").Should(HaveKeyWithValue("mode", "fast"), "keepResources keeps the copies")
	})

	It("deploys again when a resource it took over from another bundle (overwrites) is gone", func(ctx context.Context) {
		name, ns := unique("taker"), unique("taker-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
				OverwrittenResources: []fleet.OverwrittenResource{{Kind: "ConfigMap", Name: "shared"}}},
			Resources: []fleet.BundleResource{res("shared.yaml", configMap("shared", "a", "1")), res("own.yaml", configMap("own", "b", "2"))},
		})
		readyAndCurrent(name)
		// What the removal of the bundle it came from does.
		Expect(local.CoreV1().ConfigMaps(ns).Delete(ctx, "shared", metav1.DeleteOptions{})).To(Succeed())
		Eventually(cmData(ns, "shared")).Should(HaveKeyWithValue("a", "1"), "recreated without correctDrift")
		readyAndCurrent(name)
	})

	It("loses no resource that moves from a deleted bundle to a new one listing it in overwrites, whichever release acts first", func(ctx context.Context) {
		from, to, ns := unique("move-from"), unique("move-to"), unique("move-ns")
		newBundle(from, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("shared.yaml", configMap("shared", "a", "1"))},
		})
		readyAndCurrent(from)
		// As fleet apply writes them when a GitRepo's path moves: the new Bundle, listing what
		// it takes over, and the old one deleted in the same run.
		newBundle(to, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
				OverwrittenResources: []fleet.OverwrittenResource{{Kind: "ConfigMap", Name: "shared", Namespace: ns}}},
			Resources: []fleet.BundleResource{res("shared.yaml", configMap("shared", "a", "1"))},
		})
		Expect(api.Bundle().Delete(fleet.DefaultNamespace, from, nil)).To(Succeed())
		Eventually(func() *fleet.BundleDeployment { return bd(from) }).Should(BeNil())
		Eventually(cmData(ns, "shared"), 2*time.Minute).Should(HaveKeyWithValue("a", "1"))
		readyAndCurrent(to)
		Consistently(cmData(ns, "shared"), "5s").Should(HaveKeyWithValue("a", "1"))
	})

	It("deploys a bundle only once the bundles it depends on are Ready", func() {
		first, second, ns := unique("dep-first"), unique("dep-second"), unique("dep-ns")
		newBundle(first, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources:               []fleet.BundleResource{res("deploy.yaml", deployment("base", "nowhere: \"true\""))},
		})
		newBundle(second, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			DependsOn:               []fleet.BundleRef{{Name: first}},
			Resources:               []fleet.BundleResource{res("cm.yaml", configMap("after", "x", "y"))},
		})
		Eventually(func(g Gomega) {
			b := bd(second)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.WaitApplied)))
			g.Expect(b.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("waiting for dependencies"))))
		}).Should(Succeed())
		Consistently(cmData(ns, "after"), 4*time.Second, 500*time.Millisecond).Should(BeNil())
		updateBundle(first, func(b *fleet.Bundle) {
			b.Spec.Resources = []fleet.BundleResource{res("deploy.yaml", deployment("base", ""))}
		})
		readyAndCurrent(first)
		readyAndCurrent(second)
		Expect(cmData(ns, "after")()).To(HaveKeyWithValue("x", "y"))
	})

	It("uninstalls when the bundle goes away, leaving resources it must keep", func(ctx context.Context) {
		gone, kept, ns := unique("gone"), unique("kept"), unique("uninstall-ns")
		newBundle(gone, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("gone-cm"))}})
		newBundle(kept, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, KeepResources: true},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("kept-cm"))}})
		readyAndCurrent(gone)
		readyAndCurrent(kept)
		Expect(api.Bundle().Delete(fleet.DefaultNamespace, gone, nil)).To(Succeed())
		Expect(api.Bundle().Delete(fleet.DefaultNamespace, kept, nil)).To(Succeed())
		Eventually(cmData(ns, "gone-cm")).Should(BeNil())
		Eventually(func() int {
			s, err := local.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
			Expect(err).NotTo(HaveOccurred())
			return len(s.Items)
		}).Should(BeZero())
		Expect(cmData(ns, "kept-cm")()).NotTo(BeNil())
	})

	It("reports errors only the user can fix and keeps deploying other bundles", func() {
		broken, wrongType, unknownKind, good, ns := unique("broken"), unique("wrongtype"), unique("unknownkind"), unique("good"), unique("bad-ns")
		chart := func(tpl string) []fleet.BundleResource {
			return []fleet.BundleResource{res("chart/Chart.yaml", "apiVersion: v2\nname: bad\nversion: 0.1.0\n"), res("chart/templates/t.yaml", tpl)}
		}
		newBundle(broken, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{Chart: "chart"}},
			Resources: chart("{{ .Values.missing.deeper }}\n")})
		newBundle(wrongType, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{Chart: "chart",
			Values: &fleet.GenericMap{Data: map[string]any{"replicas": "many"}}}},
			Resources: chart("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: typed\nspec:\n  replicas: {{ .Values.replicas }}\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: i}]}\n")})
		newBundle(unknownKind, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("thing.yaml", "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n")}})
		newBundle(good, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("fine"))}})
		for name, want := range map[string]string{broken: "nil pointer", wrongType: "replicas", unknownKind: "Gadget"} {
			Eventually(func(g Gomega) {
				b := bd(name)
				g.Expect(b).NotTo(BeNil())
				g.Expect(b.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
				g.Expect(b.Status.Conditions).To(ContainElement(And(HaveField("Type", "Installed"), HaveField("Status", corev1.ConditionFalse),
					HaveField("Message", ContainSubstring(want)))))
			}).Should(Succeed(), "bundle %s", name)
		}
		readyAndCurrent(good)
	})

	It("recovers a release left pending by an agent killed mid-upgrade", func(ctx context.Context) {
		name, ns := unique("killed"), unique("killed-ns")
		// The agent is the real binary here, so it can be killed with SIGKILL in the middle of
		// an upgrade that waits (timeoutSeconds) for a Deployment that cannot be scheduled.
		stopAgent()
		agentProc := startAgentProcess()
		defer func() {
			agentProc.Kill()
			startAgent()
		}()
		spec := func(version, nodeSelector string) fleet.BundleSpec {
			return fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns,
				Helm: &fleet.HelmOptions{TimeoutSeconds: 300}},
				Resources: []fleet.BundleResource{res("cm.yaml", configMap("k", "v", version)), res("deploy.yaml", deployment("k", nodeSelector))}}
		}
		newBundle(name, spec("1", ""))
		readyAndCurrent(name)

		setSpec := func(b *fleet.Bundle, next fleet.BundleSpec) {
			b.Spec.BundleDeploymentOptions, b.Spec.Resources = next.BundleDeploymentOptions, next.Resources
		}
		updateBundle(name, func(b *fleet.Bundle) { setSpec(b, spec("2", "pool: nowhere")) })
		store := storage.Init(driver.NewSecrets(local.CoreV1().Secrets(ns)))
		Eventually(func(g Gomega) {
			last, err := store.Last(name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(last.Version).To(Equal(2))
			g.Expect(last.Info.Status).To(Equal(release.StatusPendingUpgrade))
		}).Should(Succeed())
		agentProc.Kill().Wait()
		Expect(agentProc.ExitCode()).To(Equal(128 + 9))
		last, err := store.Last(name)
		Expect(err).NotTo(HaveOccurred())
		Expect(last.Info.Status).To(Equal(release.StatusPendingUpgrade), "the kill left the upgrade pending")

		updateBundle(name, func(b *fleet.Bundle) { setSpec(b, spec("3", "")) })
		agentProc = startAgentProcess()
		Eventually(cmData(ns, "k")).Should(HaveKeyWithValue("v", "3"))
		b := readyAndCurrent(name)
		Expect(b.Status.Release).To(Equal(ns + "/" + name + ":3"))
		// The interrupted revision was taken over (marked failed, then superseded by the upgrade
		// that was diffed against it), and the nodeSelector it added is gone.
		rel, err := store.Get(name, 2)
		Expect(err).NotTo(HaveOccurred())
		Expect(rel.Info.Status).To(Equal(release.StatusSuperseded))
		Expect(rel.Info.Description).To(ContainSubstring("interrupted"))
		d, err := local.AppsV1().Deployments(ns).Get(ctx, "k", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty())
	})

	It("uninstalls releases of BundleDeployments deleted while the agent was down", func() {
		name, ns := unique("orphan"), unique("orphan-ns")
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("orphan-cm"))}})
		readyAndCurrent(name)
		stopAgent()
		Expect(api.Bundle().Delete(fleet.DefaultNamespace, name, nil)).To(Succeed())
		Eventually(func() bool { return bd(name) == nil }).Should(BeTrue())
		startAgent()
		Eventually(cmData(ns, "orphan-cm")).Should(BeNil())
	})
})

var _ = Describe("agent input errors", func() {
	It("names the missing valuesFrom source and deploys once it exists", func(ctx context.Context) {
		name, ns := unique("vf-missing"), unique("vfm-ns")
		newBundle(name, fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns, Helm: &fleet.HelmOptions{
				ValuesFrom: []fleet.ValuesFrom{{SecretKeyRef: &fleet.SecretKeySelector{Name: "later", Key: "v.yaml"}}}}},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("vfm"))},
		})
		Eventually(func(g Gomega) {
			b := bd(name)
			g.Expect(b).NotTo(BeNil())
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
			g.Expect(b.Status.Display.Deployed).To(And(ContainSubstring("helm.valuesFrom[0].secretKeyRef"), ContainSubstring(ns+"/later")))
		}).Should(Succeed())
		_, err := local.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		_, err = local.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later"},
			Data: map[string][]byte{"v.yaml": []byte("k: v\n")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		readyAndCurrent(name)
		Expect(strings.HasSuffix(bd(name).Status.Release, ":1")).To(BeTrue())
	})
})

// Serial: the manager's apiserver is down for a minute, which no other spec could bear.
var _ = Describe("agent with the manager unreachable", Serial, func() {
	It("keeps what is deployed, and converges without a restart once the manager is back", func(ctx context.Context) {
		name, ns := unique("outage"), unique("outage-ns")
		newBundle(name, fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: ns},
			Resources: []fleet.BundleResource{res("cm.yaml", configMap("o", "v", "1")), res("deploy.yaml", deployment("o", ""))}})
		readyAndCurrent(name)

		Expect(manager.StopAPIServer()).To(Succeed())
		down := time.Now()
		// A minute without the manager: what was deployed stays, and stays Ready.
		Consistently(func(g Gomega) {
			g.Expect(cmData(ns, "o")()).To(HaveKeyWithValue("v", "1"))
			d, err := local.AppsV1().Deployments(ns).Get(ctx, "o", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Status.AvailableReplicas).To(Equal(int32(1)))
		}, time.Minute, 2*time.Second).Should(Succeed())
		Expect(manager.StartAPIServer(ctx)).To(Succeed())
		GinkgoWriter.Printf("manager apiserver down for %s\n", time.Since(down).Round(time.Second))
		back := time.Now()

		// The agent (not restarted) picks up a change made after the outage and reports it,
		// and its heartbeat resumes.
		// client-go's informers retry with backoff (up to a minute with jitter) and must list
		// again (the restarted apiserver has forgotten older resource versions): allow three.
		updateBundle(name, func(b *fleet.Bundle) {
			b.Spec.Resources = []fleet.BundleResource{res("cm.yaml", configMap("o", "v", "2")), res("deploy.yaml", deployment("o", ""))}
		})
		Eventually(cmData(ns, "o"), 3*time.Minute).Should(HaveKeyWithValue("v", "2"), func() string {
			b := bd(name)
			if b == nil {
				return "no BundleDeployment"
			}
			return fmt.Sprintf("BundleDeployment spec %s, applied %s, status %+v", b.Spec.DeploymentID, b.Status.AppliedDeploymentID, b.Status.Display)
		})
		GinkgoWriter.Printf("agent deployed the change %s after the manager came back\n", time.Since(back).Round(time.Second))
		b := readyAndCurrent(name)
		Expect(b.Status.Release).To(Equal(ns + "/" + name + ":2"))
		Eventually(func() time.Time {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return c.Status.Agent.LastSeen.Time
		}).Should(BeTemporally(">=", back.Truncate(time.Second)))
	})
})
