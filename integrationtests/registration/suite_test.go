// Package registration_test registers real downstream clusters with a real manager: the
// manager's controllers run in-process with the fleet chart's ServiceAccount token (never an
// admin credential), each agent runs in-process against its own apiserver with nothing but the
// registration token it was given, and every permission claim is checked with the agent's real
// credential.
package registration_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Re-registrations wait for an agent's backoff (up to 15 s between its looks for the
// credential) on top of the apiserver's pace: on a machine also running another apiserver suite,
// one took over 60 s.
func TestRegistration(t *testing.T) {
	testenv.RunSuite(t, "cluster registration", 3*time.Minute, 200*time.Millisecond)
}

var (
	manager     *localcluster.Cluster
	api         fleetcontrollers.Interface
	managerKube kubernetes.Interface
	// downstreams are apiserver-only clusters, each with its own kube-system UID (identity).
	downstreams []*localcluster.Cluster
	// inForce is the configuration the manager runs with.
	inForce *config.Store
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

	// The manager runs as the fleet chart's own ServiceAccount, with nothing but the chart's
	// RBAC: every spec of this suite then also proves the chart grants what the manager uses.
	mcfg := manager.RESTConfig()
	root, err := testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	_, err = chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: manager.Kubeconfig, Namespace: systemNS,
		ReleaseName: "fleet", ChartDir: filepath.Join(root, "charts", "fleet"),
		Values: map[string]any{"apiServerURL": mcfg.Host, "apiServerCA": string(mcfg.CAData), "agentCheckinInterval": "2s"}})
	Expect(err).NotTo(HaveOccurred())
	expiry := int64(24 * 3600)
	tr, err := managerKube.CoreV1().ServiceAccounts(systemNS).CreateToken(ctx, "fleet-controller",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	asChart := &rest.Config{Host: mcfg.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: mcfg.CAData}}
	inForce = config.NewStore(config.Config{APIServerURL: mcfg.Host, APIServerCA: string(mcfg.CAData),
		AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}}.WithDefaults())
	stop := testenv.RunController(asChart, config.Config{}, controller.Options{CredentialLifetime: 10 * time.Minute, SystemNamespace: systemNS,
		Config: inForce})
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })
}, NodeTimeout(5*time.Minute))

// systemNS is the manager's system namespace (the fleet chart's release namespace).
const systemNS = "cattle-fleet-system"

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() {
		for _, c := range append([]*localcluster.Cluster{manager}, downstreams...) {
			if c != nil {
				c.WriteLogTails(GinkgoWriter, 20)
			}
		}
	}
})
