// Package registration_test registers real downstream clusters with a real manager: the
// manager's controllers run in-process, each agent runs in-process against its own apiserver
// with nothing but the registration token it was given, and every permission claim is checked
// with the agent's real credential.
package registration_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/pkg/config"
	"github.com/fleetgo/fleet/pkg/controller"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/localcluster"
)

func TestRegistration(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "cluster registration")
}

var (
	manager     *localcluster.Cluster
	api         fleetcontrollers.Interface
	managerKube kubernetes.Interface
	// downstreams are apiserver-only clusters, each with its own kube-system UID (identity).
	downstreams []*localcluster.Cluster
)

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	manager, api, err = testenv.StartWithCRDs(ctx, "manager")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(manager.Stop)
	managerKube, err = manager.Clientset()
	Expect(err).NotTo(HaveOccurred())
	downstreams, err = localcluster.StartAll(ctx, localcluster.Options{Name: "down-a"}, localcluster.Options{Name: "down-b"})
	Expect(err).NotTo(HaveOccurred())
	for _, d := range downstreams {
		DeferCleanup(d.Stop)
	}

	mcfg := manager.RESTConfig()
	raw, err := json.Marshal(map[string]string{"apiServerURL": mcfg.Host, "apiServerCA": string(mcfg.CAData), "agentCheckinInterval": "2s"})
	Expect(err).NotTo(HaveOccurred())
	cfg, err := config.Parse(string(raw))
	Expect(err).NotTo(HaveOccurred())
	config.Set(cfg)
	runCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	go func() {
		defer GinkgoRecover()
		Expect(controller.Run(runCtx, manager.RESTConfig(), controller.Options{SystemNamespace: "cattle-fleet-system", Workers: 4,
			CredentialLifetime: 10 * time.Minute})).To(Succeed())
	}()
}, NodeTimeout(5*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		for _, c := range append([]*localcluster.Cluster{manager}, downstreams...) {
			if c != nil {
				c.WriteLogTails(GinkgoWriter, 20)
			}
		}
	}
})
