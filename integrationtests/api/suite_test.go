// Package api_test proves the fleet.cattle.io/v1alpha1 contract on a real apiserver: the
// fleet-crd chart installs with the Helm SDK, Fleet's documented manifests are accepted and read
// back through the generated clients, kubectl's tables show Fleet's columns, and invalid input is
// rejected with messages that name the field.
package api_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fleet.cattle.io/v1alpha1 API")
}

var (
	cluster  *localcluster.Cluster
	clients  fleetcontrollers.Interface
	crdNames = []string{
		"bundledeployments", "bundlenamespacemappings", "bundles", "clustergroups",
		"clusterregistrations", "clusterregistrationtokens", "clusters", "contents",
		"gitreporestrictions", "gitrepos", "helmops", "imagescans", "policies", "schedules",
	}
)

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{Name: "api"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)

	rel, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{
		Kubeconfig:  cluster.Kubeconfig,
		Namespace:   "cattle-fleet-system",
		ReleaseName: "fleet-crd",
		ChartDir:    filepath.Join("..", "..", "charts", "fleet-crd"),
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(string(rel.Info.Status)).To(Equal("deployed"))

	ext, err := apiextensionsclient.NewForConfig(cluster.RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	for _, plural := range crdNames {
		Eventually(func(ctx context.Context) bool {
			crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, plural+".fleet.cattle.io", metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true
				}
			}
			return false
		}).WithContext(ctx).WithTimeout(30*time.Second).Should(BeTrue(), "CRD %s established", plural)
	}

	factory, err := fleetfactory.NewFactoryFromConfig(cluster.RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	clients = factory.Fleet().V1alpha1()
}, NodeTimeout(5*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && cluster != nil {
		cluster.WriteLogTails(GinkgoWriter, 40)
	}
})
