// Package apply_test runs `fleet apply` against a real apiserver with the fleet CRDs, a Helm
// chart repository with basic auth and an OCI registry, all started by the suite.
package apply_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
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
	cluster, clients, err = testenv.StartWithCRDs(ctx, "apply")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)

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
