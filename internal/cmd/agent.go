package cmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetgo/fleet/internal/agent"
	"github.com/fleetgo/fleet/internal/agent/register"
	"github.com/fleetgo/fleet/internal/registration"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// agentFlags are `fleet agent`'s flags.
type agentFlags struct {
	local              kubeFlags
	upstreamKubeconfig string
	o                  agent.Options
	logJSON, debug     bool
	reg                register.Options
	renewEvery         time.Duration
}

func newAgent() *cobra.Command {
	f := &agentFlags{}
	local, o, reg := &f.local, &f.o, &f.reg
	upstreamKubeconfig, renewEvery, logJSON, debug := &f.upstreamKubeconfig, &f.renewEvery, &f.logJSON, &f.debug
	c := &cobra.Command{
		Use:   "agent",
		Short: "Run the agent: deploy this cluster's BundleDeployments from the manager and report their status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			setupLogging(f.logJSON, f.debug)
			return f.run(cmd.Context())
		},
	}
	local.bind(c)
	fl := c.Flags()
	fl.StringVar(upstreamKubeconfig, "upstream-kubeconfig", "", "kubeconfig of the manager cluster; without it the agent uses its stored credential, registering first with the "+registration.BootstrapSecret+" Secret")
	fl.StringVar(&reg.TLSMode, "agent-tls-mode", register.TLSSystemStore, "how the manager's certificate is trusted: "+register.TLSSystemStore+" (the system's CA store and apiServerCA) or "+register.TLSStrict+" (apiServerCA only)")
	fl.StringVar(&reg.APIServerURL, "api-server-url", "", "the manager's URL, winning over the stored credential's (default $FLEET_API_SERVER_URL)")
	fl.StringVar(&reg.APIServerCA, "api-server-ca", "", "PEM CA bundle of the manager, winning over the stored credential's (default $FLEET_API_SERVER_CA)")
	fl.StringVar(&reg.ClientID, "client-id", "", "this cluster's identity at registration (default: the agent ConfigMap's clientID, else the kube-system namespace UID)")
	fl.StringToStringVar(&reg.Labels, "label", nil, "label for this cluster's Cluster at registration (k=v, repeatable; added to the agent ConfigMap's labels)")
	fl.DurationVar(renewEvery, "credential-renew-every", 0, "renew the agent's credential this often (default: hourly, or after a third of its lifetime)")
	fl.StringVar(&o.Namespace, "namespace", fleet.SystemNamespace, "downstream namespace the agent runs in")
	fl.StringVar(&o.ClusterNamespace, "cluster-namespace", "", "namespace on the manager holding this cluster's BundleDeployments (with --upstream-kubeconfig)")
	fl.StringVar(&o.ClusterName, "cluster-name", "", "name of this cluster's Cluster on the manager (heartbeat)")
	fl.StringVar(&o.ClusterObjectNamespace, "cluster-object-namespace", fleet.DefaultNamespace, "namespace of that Cluster")
	fl.DurationVar(&o.CheckinInterval, "checkin-interval", 0, "heartbeat interval (default 15m)")
	fl.DurationVar(&o.MonitorInterval, "monitor-interval", 0, "re-check interval of deployed bundles besides watches (default 1m)")
	fl.DurationVar(&o.GCInterval, "gc-interval", 0, "interval of release garbage collection (default 15m)")
	fl.IntVar(&o.Workers, "workers", 50, "BundleDeployments deployed in parallel")
	fl.BoolVar(&o.LeaderElect, "leader-elect", true, "run only while holding the leader lease in this cluster")
	bindLeaderTiming(fl, &o.LeaderTiming)
	fl.StringVar(&o.HealthAddr, "health-addr", ":8082", "address of /healthz and /readyz (empty disables)")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", ":8083", "address of /metrics (empty disables)")
	fl.StringVar(&o.ProfileAddr, "profile-addr", "", "address of Go's /debug/pprof/ profiles (empty disables)")
	bindLogging(fl, logJSON, debug)
	return c
}

// run checks the flags and runs the agent: on the manager credentials of --upstream-kubeconfig,
// or on its stored credential, registering first with the bootstrap token if need be.
func (f *agentFlags) run(ctx context.Context) error {
	reg := f.reg
	if reg.TLSMode != register.TLSSystemStore && reg.TLSMode != register.TLSStrict {
		return fmt.Errorf("--agent-tls-mode %q: must be %s or %s", reg.TLSMode, register.TLSSystemStore, register.TLSStrict)
	}
	if reg.APIServerURL == "" {
		reg.APIServerURL = os.Getenv("FLEET_API_SERVER_URL")
	}
	if reg.APIServerCA == "" {
		reg.APIServerCA = os.Getenv("FLEET_API_SERVER_CA")
	}
	// Remote kustomize resources, an opt-in of the cluster's (agentEnvVars).
	render.RemoteKustomize = os.Getenv(render.RemoteKustomizeEnv) == "true"
	cfg, err := f.local.restConfig()
	if err != nil {
		// In a pod without a kubeconfig: the cluster the agent runs in.
		in, ierr := rest.InClusterConfig()
		if ierr != nil {
			return err
		}
		cfg = in
	}
	if f.upstreamKubeconfig == "" {
		return agent.RunRegistered(ctx, cfg, f.o, reg, f.renewEvery)
	}
	upstream, err := clientcmd.BuildConfigFromFlags("", f.upstreamKubeconfig)
	if err != nil {
		return fmt.Errorf("--upstream-kubeconfig %s: %w", f.upstreamKubeconfig, err)
	}
	if f.o.ClusterNamespace == "" {
		return fmt.Errorf("--cluster-namespace is required with --upstream-kubeconfig")
	}
	return agent.Run(ctx, upstream, cfg, f.o)
}
