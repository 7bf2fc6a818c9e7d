package cmd

import (
	"encoding/json"
	"fmt"
	"os"
	runtimedebug "runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/controller/gitrepo"
	"github.com/fleetgo/fleet/internal/controller/registration"
	"github.com/fleetgo/fleet/internal/serve"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func newController() *cobra.Command {
	var (
		kube      kubeFlags
		o         controller.Options
		logJSON   bool
		debug     bool
		gcPercent int
		gitops    bool
		helmops   bool
		pprofDir  string
		pprofTime time.Duration
		warm      bool
	)
	c := &cobra.Command{
		Use:   "controller",
		Short: "Run the manager's controllers against the management cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := registration.CheckCredentialLifetime(o.CredentialLifetime); err != nil {
				return err
			}
			o.DisableGitOps, o.DisableHelmOps, o.ColdStandby = !gitops, !helmops, !warm
			o.AgentDebug = debug
			setupLogging(logJSON, debug)
			// The manager's memory is mostly long-lived caches: collecting when the heap grows
			// by half rather than doubles costs little CPU and saves a quarter of the peak.
			// GOGC, when set, wins.
			if _, set := os.LookupEnv("GOGC"); !set && gcPercent > 0 {
				runtimedebug.SetGCPercent(gcPercent)
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			go serve.RecordCPUProfiles(cmd.Context(), pprofDir, pprofTime)
			return controller.Run(cmd.Context(), cfg, o)
		},
	}
	kube.bind(c)
	fl := c.Flags()
	fl.BoolVar(&gitops, "gitops", true, "run the GitRepo controller and the webhook receiver (false: Bundles come from elsewhere)")
	fl.BoolVar(&warm, "warm-standby", true, "with --leader-elect, fill the caches while waiting for the Lease, so that taking over is only the controllers' pass (false: fill them once leading)")
	fl.BoolVar(&helmops, "helmops", true, "run the HelmOp controller (false: HelmOps are left alone, as Fleet's helmops.enabled=false)")
	bindControllerFlags(fl, &o)
	bindLogging(fl, &logJSON, &debug)
	fl.StringVar(&pprofDir, "cpu-profile-dir", "", "directory to write CPU profiles into without pause, one per --cpu-profile-period (the fleet chart's cpuPprof; empty disables)")
	fl.DurationVar(&pprofTime, "cpu-profile-period", time.Minute, "length of each CPU profile --cpu-profile-dir receives")
	fl.IntVar(&gcPercent, "gc-percent", 50, "heap growth (percent) that triggers a garbage collection, unless GOGC is set")
	return c
}

// bindControllerFlags binds the flags that go into the controller's Options as they are.
func bindControllerFlags(fl *pflag.FlagSet, o *controller.Options) {
	fl.StringVar(&o.SystemNamespace, "namespace", fleet.SystemNamespace, "system namespace: configuration and leader election")
	fl.IntVar(&o.Workers, "workers", 50, "workers per controller")
	fl.BoolVar(&o.LeaderElect, "leader-elect", true, "run only while holding the leader lease")
	bindLeaderTiming(fl, &o.LeaderTiming)
	fl.StringVar(&o.HealthAddr, "health-addr", ":8081", "address of /healthz and /readyz (empty disables)")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address of /metrics (empty disables)")
	fl.StringVar(&o.ProfileAddr, "profile-addr", "", "address of Go's /debug/pprof/ profiles (empty disables)")
	fl.Float32Var(&o.QPS, "kube-api-qps", controller.DefaultQPS, "requests per second to the apiserver")
	fl.IntVar(&o.Burst, "kube-api-burst", controller.DefaultBurst, "burst of requests to the apiserver")
	fl.BoolVar(&o.Bootstrap.LocalAgentDisabled, "bootstrap-local-agent-disabled", false, "create no Cluster \"local\" (and so no agent) for the manager's own cluster")
	fl.StringToStringVar(&o.Bootstrap.ClusterLabels, "bootstrap-cluster-labels", nil, "labels (k=v,...) the Cluster \"local\" is created with")
	fl.StringVar(&o.Bootstrap.AgentNamespace, "bootstrap-agent-namespace", "", "namespace of the manager cluster's own agent (default cattle-fleet-local-system)")
	fl.StringVar(&o.WebhookAddr, "webhook-addr", ":8084", "address of the git providers' push webhook receiver (empty disables)")
	fl.StringVar(&o.ShardID, "shard-id", "", "handle only GitRepos, Bundles, BundleDeployments, HelmOps and ImageScans labelled "+fleet.ShardLabel+"=ID (empty: the unlabelled ones, and everything that is one per management cluster)")
	fl.Var(jsonMap{&o.ShardNodeSelector}, "shard-node-selector", `nodeSelector of the GitRepo Jobs this controller runs, as JSON ({"kubernetes.io/hostname": "node0"}): a shard's nodes`)
	fl.BoolVar(&o.InsecureSkipHostKeyChecks, "insecure-skip-host-key-checks", false, "trust SSH git hosts that neither a GitRepo's known_hosts nor the ConfigMap known-hosts names, whatever their key (the fleet chart's insecureSkipHostKeyChecks)")
	fl.BoolVar(&o.ImageScanEnabled, "imagescan-enabled", false, "run ImageScans: scan registries and commit newer image tags to their GitRepos' repositories")
	fl.StringVar(&o.GitJobImage, "git-job-image", "", "image (with the fleet binary) of the Jobs that clone GitRepos and apply them; empty runs them in this process")
	fl.IntVar(&o.GitRuns, "git-runs", 4, "GitRepo clone-and-apply runs at once when they run in this process")
	fl.DurationVar(&o.GitRunTimeout, "git-run-timeout", gitrepo.DefaultRunTimeout, "longest a GitRepo clone-and-apply may take when it runs in this process (a stalled git or chart server)")
	fl.BoolVar(&o.ManageAgents, "manage-agents", true, "keep every cluster's agent as configured through its own Bundle, fleet-agent-<cluster> (with --agent-image)")
	fl.StringVar(&o.AgentImage, "agent-image", "", "agent image installed into clusters the manager imports itself (Cluster.spec.kubeConfigSecret)")
	fl.StringVar(&o.RegistrationNamespace, "registration-namespace", fleet.ClustersSystemNamespace, "namespace of the credentials registering agents pick up")
	fl.DurationVar(&o.CredentialLifetime, "agent-credential-lifetime", registration.DefaultCredentialLifetime, "lifetime of an agent's credential (at least 10m); agents renew it hourly or after a third of it")
}

// jsonMap is a flag whose value is a JSON object of strings (Fleet passes a shard's nodeSelector
// this way).
type jsonMap struct{ m *map[string]string }

func (j jsonMap) String() string {
	if j.m == nil || len(*j.m) == 0 {
		return ""
	}
	b, _ := json.Marshal(*j.m)
	return string(b)
}

func (j jsonMap) Set(s string) error {
	m := map[string]string{}
	if strings.TrimSpace(s) != "" && strings.TrimSpace(s) != "null" {
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return fmt.Errorf("want a JSON object of strings, like {\"kubernetes.io/hostname\": \"node0\"}: %w", err)
		}
	}
	*j.m = m
	return nil
}

func (j jsonMap) Type() string { return "json" }
