// Package localcluster_test proves the test harness itself: real control planes that are
// independent of each other, enforce RBAC, collect garbage and run workloads through kwok, and
// that fail fast and clean up when something is wrong.
package localcluster_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

func TestLocalCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "localcluster harness")
}

var (
	// workloads runs every component; controllers runs apiserver and controller-manager.
	workloads, controllers *localcluster.Cluster
)

var _ = BeforeSuite(func(ctx context.Context) {
	clusters, err := localcluster.StartAll(ctx,
		localcluster.Options{Name: "workloads", Tier: localcluster.Workloads},
		localcluster.Options{Name: "controllers", Tier: localcluster.Controllers},
	)
	Expect(err).NotTo(HaveOccurred())
	workloads, controllers = clusters[0], clusters[1]
	DeferCleanup(func() {
		workloads.Stop()
		controllers.Stop()
	})
}, NodeTimeout(localcluster.DefaultStartTimeout*3))

// Component logs of every cluster are printed when a spec fails.
var _ = ReportAfterEach(func(r SpecReport) {
	if !r.Failed() {
		return
	}
	for _, c := range []*localcluster.Cluster{workloads, controllers} {
		if c != nil {
			c.WriteLogTails(GinkgoWriter, 40)
		}
	}
})
