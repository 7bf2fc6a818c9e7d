package cmd

import (
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleetgo/fleet/internal/leader"
	"github.com/fleetgo/fleet/internal/logfields"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// kubeFlags are the standard connection flags of commands that talk to a cluster.
type kubeFlags struct {
	kubeconfig string
	context    string
}

func (k *kubeFlags) bind(c *cobra.Command) {
	c.Flags().StringVar(&k.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	c.Flags().StringVar(&k.context, "context", "", "kubeconfig context to use")
}

// restConfig loads the client configuration the way kubectl does.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: k.context}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
}

// clients are the manager's Fleet API and its core API, reached with the flags.
func (k *kubeFlags) clients() (fleetcontrollers.Interface, kubernetes.Interface, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, nil, err
	}
	ff, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return ff.Fleet().V1alpha1(), kc, nil
}

// bindLogging adds the logging flags of the long-running commands.
func bindLogging(fl *pflag.FlagSet, logJSON, debug *bool) {
	fl.BoolVar(logJSON, "log-json", false, "log as JSON")
	fl.BoolVar(debug, "debug", false, "log at debug level")
}

// setupLogging applies them.
func setupLogging(logJSON, debug bool) {
	if logJSON {
		logrus.SetFormatter(&logrus.JSONFormatter{})
	}
	if debug {
		logrus.SetLevel(logrus.DebugLevel)
		if !logJSON {
			// Debugging is mostly about timing: show milliseconds.
			logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "15:04:05.000"})
		}
	}
	// Whatever the format, no Secret's data is written (wrangler's apply logs patched objects
	// in full at debug level).
	logrus.SetFormatter(logfields.Redacting(logrus.StandardLogger().Formatter))
}

// bindLeaderTiming adds the leader Lease's timing flags (the charts' leaderElection values).
func bindLeaderTiming(fl *pflag.FlagSet, t *leader.Timing) {
	fl.DurationVar(&t.LeaseDuration, "leader-election-lease-duration", leader.LeaseDuration, "how long a leader Lease is valid without renewal")
	fl.DurationVar(&t.RenewDeadline, "leader-election-renew-deadline", leader.RenewDeadline, "how long the leader keeps trying to renew before it gives up")
	fl.DurationVar(&t.RetryPeriod, "leader-election-retry-period", leader.RetryPeriod, "how often candidates try to acquire or renew the Lease")
}
