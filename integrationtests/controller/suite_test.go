// Package controller_test runs the manager's controllers, registered through the real factories,
// against a real apiserver. Clusters are created directly and BundleDeployment status is written
// by the tests in place of agents.
package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestController(t *testing.T) {
	testenv.RunSuite(t, "fleet controller", 30*time.Second, 100*time.Millisecond)
}

var (
	healthAddr, metricsAddr string
	cluster                 *localcluster.Cluster
	api                     fleetcontrollers.Interface
	kube                    kubernetes.Interface
	// inForce is the configuration the suite's manager runs with.
	inForce *config.Store
)

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	cluster, api, err = testenv.StartWithCRDs(ctx, "manager")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)
	kube, err = cluster.Clientset()
	Expect(err).NotTo(HaveOccurred())

	// Short intervals so time-based behaviour shows within a test.
	healthAddr, metricsAddr = freeAddr(), freeAddr()
	inForce = config.NewStore(config.Config{AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}}.WithDefaults())
	stop := testenv.RunController(cluster.RESTConfig(), config.Config{},
		controller.Options{HealthAddr: healthAddr, MetricsAddr: metricsAddr, Config: inForce, ContentGracePeriod: 2 * time.Second})
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && cluster != nil {
		cluster.WriteLogTails(GinkgoWriter, 30)
	}
})

func freeAddr() string {
	addr, err := testenv.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	return addr
}
