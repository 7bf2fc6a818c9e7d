package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet deploy", func() {
	It("prints what a BundleDeployment installs with --dry-run, and installs it without", func(ctx context.Context) {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		Expect(json.NewEncoder(zw).Encode(map[string]any{"resources": []fleet.BundleResource{{Name: "cm.yaml",
			Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deployed\ndata:\n  from: {{ .Values.from }}\n"}}})).To(Succeed())
		Expect(zw.Close()).To(Succeed())
		content := &fleet.Content{TypeMeta: metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "Content"},
			ObjectMeta: metav1.ObjectMeta{Name: "s-abc"}, Content: gz.Bytes()}
		bd := &fleet.BundleDeployment{TypeMeta: metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "BundleDeployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "shop-app", Namespace: "cluster-ns"},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-abc:1", Options: fleet.BundleDeploymentOptions{DefaultNamespace: "deploy-target",
				Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]any{"from": "values"}}}}}}
		var file bytes.Buffer
		for _, o := range []any{bd, content} {
			data, err := yaml.Marshal(o)
			Expect(err).NotTo(HaveOccurred())
			file.WriteString("---\n")
			file.Write(data)
		}
		path := filepath.Join(GinkgoT().TempDir(), "bd.yaml")
		Expect(os.WriteFile(path, file.Bytes(), 0o600)).To(Succeed())

		out, err := testenv.FleetCLI("deploy", "-i", path, "--dry-run")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("name: deployed"))
		Expect(out).To(ContainSubstring("from: values"))

		out, err = testenv.FleetCLI("deploy", "-i", path, "--kubeconfig", cluster.Kubeconfig, "-n", "cattle-fleet-system")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("deployed release deploy-target/shop-app:1"))
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		cm, err := kube.CoreV1().ConfigMaps("deploy-target").Get(ctx, "deployed", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data).To(HaveKeyWithValue("from", "values"))
	})
})
