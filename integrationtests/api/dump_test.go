package api_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet dump", func() {
	It("writes every Fleet object into an archive, and no Secret", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const ns = "dumped"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git-creds"},
			StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = clients.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
			Spec: fleet.GitRepoSpec{Repo: "https://git.example/shop", ClientSecretName: "git-creds"}})
		Expect(err).NotTo(HaveOccurred())
		_, err = clients.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}})
		Expect(err).NotTo(HaveOccurred())

		file := filepath.Join(GinkgoT().TempDir(), "dump.tgz")
		out, err := testenv.FleetCLI("dump", file, "--kubeconfig", cluster.Kubeconfig, "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("wrote 2 objects to " + file))

		f, err := os.Open(file)
		Expect(err).NotTo(HaveOccurred())
		defer f.Close()
		zr, err := gzip.NewReader(f)
		Expect(err).NotTo(HaveOccurred())
		tr := tar.NewReader(zr)
		files := map[string]string{}
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			Expect(err).NotTo(HaveOccurred())
			data, err := io.ReadAll(tr)
			Expect(err).NotTo(HaveOccurred())
			files[h.Name] = string(data)
		}
		Expect(files).To(HaveKey("gitrepos/dumped/shop.yaml"))
		Expect(files).To(HaveKey("clustergroups/dumped/prod.yaml"))
		Expect(files["gitrepos/dumped/shop.yaml"]).To(ContainSubstring("https://git.example/shop"))
		for name, data := range files {
			Expect(data).NotTo(ContainSubstring("hunter2"), name)
			Expect(data).NotTo(ContainSubstring("managedFields"), name)
			Expect(strings.HasPrefix(name, "secrets/")).To(BeFalse(), name)
		}
	})
})
