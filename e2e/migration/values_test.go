package migration_test

// The second bundle of the fixture: a chart whose Helm values Fleet 0.13 and later keep outside
// the Bundle and its BundleDeployments (spec.valuesHash, Secrets of types
// fleet.cattle.io/bundle-values/v1alpha1 and fleet.cattle.io/bundle-deployment/v1alpha1), and
// which reads more values downstream (helm.valuesFrom, a ConfigMap of the release namespace).
// Moved over, its release must keep both: upgraded to the chart's defaults, the ConfigMap it
// renders would change.

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

const (
	valuesBundle    = "migrate-values" // <gitrepo>-<path>, also the release name
	valuesNamespace = "migrate-values"
)

var valuesFiles = map[string]string{
	"fleet.yaml": "defaultNamespace: " + valuesNamespace + "\nhelm:\n  values:\n    greeting: from-git\n" +
		"  valuesFrom:\n  - configMapKeyRef:\n      name: values-cm\n      key: values.yaml\n",
	"Chart.yaml":  "apiVersion: v2\nname: values-app\nversion: 0.1.0\n",
	"values.yaml": "greeting: chart-default\ncolor: chart-default\n",
	"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values-settings\ndata:\n" +
		"  greeting: {{ .Values.greeting | quote }}\n  color: {{ .Values.color | quote }}\n",
}

// valuesChart are the bundle's resources (fleet.yaml is its options).
var valuesChart = []string{"Chart.yaml", "templates/cm.yaml", "values.yaml"}

// gitValues are the bundle's helm.values, as Fleet stores them (JSON) with their hash.
var gitValues = []byte(`{"greeting":"from-git"}`)

func valuesHash() string {
	return bundlevalues.BundleHash(map[string][]byte{"values.yaml": gitValues})
}

// deploymentValues is the data of a BundleDeployment's options Secret as Fleet writes it.
var deploymentValues = map[string][]byte{"values": gitValues, "stagedValues": gitValues}

// valuesFrom is the bundle's helm.valuesFrom.
var valuesFrom = []fleet.ValuesFrom{{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "values-cm", Key: "values.yaml"}}}

// valuesConfigMapUIDs are the UIDs of the ConfigMap the chart renders, by cluster, under Fleet.
var valuesConfigMapUIDs = map[string]types.UID{}

func writeValuesFolder(src string) {
	for name, content := range valuesFiles {
		p := filepath.Join(src, "values", name)
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
}

// writeValuesBundle writes the Bundle as Fleet 0.13+ stores it: helm.values moved into the
// Secret named as the Bundle, spec.valuesHash their hash.
func writeValuesBundle() string {
	content := writeContent(valuesFiles, valuesChart)
	var resources []fleet.BundleResource
	for _, name := range valuesChart {
		resources = append(resources, fleet.BundleResource{Name: name, Content: valuesFiles[name]})
	}
	b, err := api.Bundle().Create(&fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: valuesBundle, Namespace: fleet.DefaultNamespace, Finalizers: []string{fleet.BundleFinalizer},
			Labels: map[string]string{fleet.RepoLabel: gitRepoName, fleet.CommitLabel: commit}},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: valuesNamespace,
			Helm: &fleet.HelmOptions{ValuesFrom: valuesFrom}},
			ValuesHash: valuesHash(), Resources: resources, Targets: []fleet.BundleTarget{{Name: "migrated", ClusterGroup: groupName}}}})
	Expect(err).NotTo(HaveOccurred())
	b.Status.Summary = fleet.BundleSummary{DesiredReady: 2, Ready: 2}
	b.Status.Display.ReadyClusters = "2/2"
	b.Status.ObservedGeneration = b.Generation
	_, err = api.Bundle().UpdateStatus(b)
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: valuesBundle}, Type: fleet.SecretTypeBundleValues,
		Data: map[string][]byte{"values.yaml": gitValues}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return content
}

// writeValuesDeployment writes d's BundleDeployment of the values bundle as Fleet 0.13+ stores
// it (its values in the Secret named as it, in the cluster namespace), reported applied.
func writeValuesDeployment(d *downstream, content string) {
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: valuesNamespace, Helm: &fleet.HelmOptions{ValuesFrom: valuesFrom}}
	writeDeployment(d, valuesBundle, valuesNamespace, opts, content, bundlevalues.DeploymentHash(deploymentValues))
	_, err := managerKube.CoreV1().Secrets(d.clusterNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: valuesBundle}, Type: fleet.SecretTypeBundleDeploymentOptions,
		Data: deploymentValues}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// writeValuesDownstream leaves in d the valuesFrom ConfigMap and the release Fleet's agent made
// with both sources of values.
func writeValuesDownstream(ctx context.Context, d *downstream) {
	createNamespace(ctx, d.kube, valuesNamespace, nil)
	_, err := d.kube.CoreV1().ConfigMaps(valuesNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "values-cm"},
		Data: map[string]string{"values.yaml": "color: from-" + d.env + "\n"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	dir := fleetChart(valuesBundle, valuesFiles, valuesChart)
	_, err = chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: d.Kubeconfig, Namespace: valuesNamespace,
		ReleaseName: valuesBundle, ChartDir: dir, Values: map[string]any{"greeting": "from-git", "color": "from-" + d.env}})
	Expect(err).NotTo(HaveOccurred())
	cm, err := d.kube.CoreV1().ConfigMaps(valuesNamespace).Get(ctx, "values-settings", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(cm.Data).To(Equal(map[string]string{"greeting": "from-git", "color": "from-" + d.env}))
	valuesConfigMapUIDs[d.env] = cm.UID
}

// valuesKept: the values release renders what it rendered under Fleet, from the same object.
func valuesKept(ctx context.Context, g Gomega, d *downstream) {
	cm, err := d.kube.CoreV1().ConfigMaps(valuesNamespace).Get(ctx, "values-settings", metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cm.Data).To(Equal(map[string]string{"greeting": "from-git", "color": "from-" + d.env}), "%s: values lost", d.env)
	g.Expect(cm.UID).To(Equal(valuesConfigMapUIDs[d.env]), "%s: ConfigMap recreated", d.env)
}

func valuesRevisions(ctx context.Context, g Gomega, d *downstream) []string {
	return revisionsOf(ctx, g, d, valuesNamespace, valuesBundle)
}
