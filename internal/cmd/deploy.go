package cmd

import (
	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/deploy"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func newDeploy() *cobra.Command {
	var kube kubeFlags
	var o deploy.Options
	c := &cobra.Command{
		Use:   "deploy -i FILE [--dry-run]",
		Short: "Install a BundleDeployment and its Content (from FILE) into this cluster as the agent would, or print what it would install",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !o.DryRun {
				cfg, err := kube.restConfig()
				if err != nil {
					return err
				}
				o.Config = cfg
			}
			return deploy.Run(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	kube.bind(c)
	c.Flags().StringVarP(&o.InputFile, "input-file", "i", "", "YAML file with the BundleDeployment and its Content")
	c.Flags().BoolVarP(&o.DryRun, "dry-run", "d", false, "print the manifests instead of installing them (needs no cluster)")
	c.Flags().StringVarP(&o.AgentNamespace, "namespace", "n", fleet.SystemNamespace, "the agent's namespace (its ServiceAccounts are the bundle's to act as)")
	_ = c.MarkFlagRequired("input-file")
	return c
}
