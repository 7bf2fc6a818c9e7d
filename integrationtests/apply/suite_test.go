// Package apply_test runs `fleet apply` against a real apiserver with the fleet CRDs, a Helm
// chart repository with basic auth and an OCI registry, all started by the suite.
package apply_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetgo/fleet/pkg/chartinstall"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/localcluster"
	"github.com/fleetgo/fleet/pkg/localserver"
)

func TestApply(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "fleet apply")
}

var (
	cluster   *localcluster.Cluster
	clients   fleetcontrollers.Interface
	chartRepo *localserver.ChartRepo
	ociReg    *localserver.OCIRegistry
	repoAuth  = localserver.BasicAuth{Username: "charts", Password: "pa55"}
)

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	cluster, err = localcluster.Start(ctx, localcluster.Options{Name: "apply"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)
	_, err = chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{
		Kubeconfig: cluster.Kubeconfig, Namespace: "cattle-fleet-system", ReleaseName: "fleet-crd",
		ChartDir: filepath.Join("..", "..", "charts", "fleet-crd"), Wait: true,
	})
	Expect(err).NotTo(HaveOccurred())
	f, err := fleetfactory.NewFactoryFromConfig(cluster.RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	clients = f.Fleet().V1alpha1()
	// CRDs are served a moment after they are created.
	Eventually(func() error {
		_, err := clients.Bundle().List("default", metav1ListOptions())
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())

	chartRepo, err = localserver.StartChartRepo(GinkgoT().TempDir(), repoAuth)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(chartRepo.Close)
	ociReg, err = localserver.StartOCIRegistry(ctx, GinkgoT().TempDir(), repoAuth)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ociReg.Close)
}, NodeTimeout(5*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && cluster != nil {
		cluster.WriteLogTails(GinkgoWriter, 40)
	}
})
