package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/chartrender"
	"github.com/fleetgo/fleet/internal/cli/install"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func newInstall() *cobra.Command {
	c := &cobra.Command{
		Use:   "install",
		Short: "Print manifests that install the manager, or register a downstream cluster, rendered from fleet's own charts",
	}
	c.AddCommand(newInstallController(), newInstallAgentToken(), newInstallAgentConfig())
	return c
}

func newInstallController() *cobra.Command {
	var o chartrender.ControllerOptions
	c := &cobra.Command{
		Use:   "controller",
		Short: "Print the manager's manifest (the fleet-crd and fleet charts); needs no cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := chartrender.Controller(o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.ControllerImage, "controller-image", "", "image of the fleet controller (repository[:tag])")
	fl.StringVar(&o.AgentImage, "agent-image", "", "image of agents the manager installs itself (repository[:tag])")
	fl.BoolVar(&o.CRDsOnly, "crds-only", false, "print only the CustomResourceDefinitions")
	fl.StringVar(&o.SystemNamespace, "system-namespace", fleet.SystemNamespace, "namespace of the manager")
	return c
}

func newInstallAgentToken() *cobra.Command {
	var (
		kube kubeFlags
		o    install.AgentTokenOptions
	)
	c := &cobra.Command{
		Use:   "agent-token",
		Short: "Create a registration token on the manager and print the manifest that registers a downstream cluster with it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, kc, err := kube.clients()
			if err != nil {
				return err
			}
			out, err := install.AgentToken(cmd.Context(), api, kc, o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	kube.bind(c)
	fl := c.Flags()
	fl.StringVarP(&o.Namespace, "namespace", "n", fleet.DefaultNamespace, "namespace of the token: registered clusters' Clusters live there")
	fl.StringVar(&o.Name, "name", "", "name of the token (default: generated)")
	fl.DurationVar(&o.TTL, "ttl", install.DefaultAgentTokenTTL, "how long the token may be used to register (0: never expires)")
	fl.StringVar(&o.ServerURL, "server-url", "", "the manager's URL as downstream clusters reach it (default: the manager's configured apiServerURL)")
	fl.StringVar(&o.CAFile, "ca-file", "", "PEM file with the CA downstream clusters trust for the manager (default: the manager's configured apiServerCA)")
	fl.BoolVar(&o.NoCA, "no-ca", false, "hand out no CA: the manager's certificate is signed by a CA the system trusts")
	fl.StringVar(&o.SystemNamespace, "system-namespace", fleet.SystemNamespace, "namespace of the agent in the downstream cluster")
	fl.StringVar(&o.AgentImage, "agent-image", "", "image of the agent (repository[:tag])")
	fl.StringVar(&o.Group, "group", "", "ClusterGroup (in the token's namespace) the registered clusters join: they get the labels its selector matches and, of the agent's own, only those --label-keys lists")
	fl.StringSliceVar(&o.LabelKeys, "label-keys", nil, "with --group: label keys whose values the agent may choose (agent-config labels), as long as they join no other ClusterGroup")
	fl.StringVar(&o.Cluster, "cluster", "", "a Cluster made ahead of time with spec.clientID (in the token's namespace): the manifest carries a registration key for it, and no registration without that key gets the Cluster")
	return c
}

func newInstallAgentConfig() *cobra.Command {
	var o chartrender.AgentConfigOptions
	c := &cobra.Command{
		Use:   "agent-config",
		Short: "Print the agent configuration (labels and identity for registration) to apply to a downstream cluster before its agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := chartrender.AgentConfig(o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	fl := c.Flags()
	fl.StringToStringVarP(&o.Labels, "label", "l", nil, "label of the cluster's Cluster (k=v, repeatable)")
	fl.StringVar(&o.ClientID, "client-id", "", "identity of the cluster (default: its kube-system namespace UID)")
	fl.StringVar(&o.SystemNamespace, "system-namespace", fleet.SystemNamespace, "namespace of the agent in the downstream cluster")
	return c
}
