// Package migration_test moves a running Fleet installation onto this one: a management
// cluster and two downstream clusters already hold what Fleet writes (fixture_test.go), then
// this project's controller and agents start on them. Nothing may be reinstalled, recreated or
// registered again, and the GitRepo must end Ready.
package migration_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

func TestMigration(t *testing.T) {
	testenv.RunSuite(t, "moving from Fleet", 2*time.Minute, 250*time.Millisecond)
}

var (
	manager     *localcluster.Cluster
	api         fleetcontrollers.Interface
	managerKube kubernetes.Interface
	downstreams []*downstream
	git         *localserver.GitServer
	fleetBin    string
	logDir      string
	processes   []*localcluster.Process
)

// start runs the fleet binary with args until the suite ends (specs start them, so AfterSuite
// stops them); a failed spec prints its log.
func start(name string, args ...string) {
	p, err := localcluster.StartProcess(name, fleetBin, args, logDir)
	Expect(err).NotTo(HaveOccurred(), name)
	processes = append(processes, p)
}

var _ = AfterSuite(func() {
	for _, p := range processes {
		p.Stop()
	}
})

var _ = BeforeSuite(func(ctx context.Context) {
	defer func() {
		if CurrentSpecReport().Failed() {
			dumpLogs()
		}
	}()
	fleetBin = testenv.FleetBinary()
	logDir = GinkgoT().TempDir()

	var clusters []*localcluster.Cluster
	done := make(chan error, 1)
	go func() {
		var err error
		clusters, err = localcluster.StartAll(ctx,
			localcluster.Options{Name: "migrate-dev", Tier: localcluster.Workloads},
			localcluster.Options{Name: "migrate-prod", Tier: localcluster.Workloads})
		done <- err
	}()
	var err error
	manager, api, err = testenv.StartWithCRDsOptions(ctx, localcluster.Options{Name: "migrate-manager", Tier: localcluster.Controllers})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
	Expect(<-done).To(Succeed())
	for _, c := range clusters {
		DeferCleanup(c.Stop)
	}
	managerKube, err = manager.Clientset()
	Expect(err).NotTo(HaveOccurred())

	git, err = localserver.StartGitServer(filepath.Join(GinkgoT().TempDir(), "git"), localserver.BasicAuth{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(git.Close)

	downstreams = []*downstream{{Cluster: clusters[0], env: "dev"}, {Cluster: clusters[1], env: "prod"}}
	writeFleetInstallation(ctx)
}, NodeTimeout(8*time.Minute))

var _ = AfterEach(func() {
	if CurrentSpecReport().Failed() {
		dumpLogs()
	}
})

func dumpLogs() {
	for _, p := range processes {
		fmt.Fprintf(GinkgoWriter, "----- %s, last 60 lines -----\n%s\n", p.LogPath(), p.Tail(60))
	}
	for _, d := range downstreams {
		if bd, err := api.BundleDeployment().Get(d.clusterNS, bundleName, metav1.GetOptions{}); err == nil {
			out, _ := yaml.Marshal(bd)
			fmt.Fprintf(GinkgoWriter, "----- BundleDeployment of %s -----\n%s\n", d.env, out)
		}
	}
	if manager != nil {
		manager.WriteLogTails(GinkgoWriter, 20)
	}
}
