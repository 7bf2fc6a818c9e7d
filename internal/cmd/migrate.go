package cmd

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/migrate"
)

func newMigrate() *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Run one-time migrations an upgrade from an older Fleet needs",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var kube kubeFlags
	systemNamespace := os.Getenv("NAMESPACE")
	if systemNamespace == "" {
		systemNamespace = "cattle-fleet-system"
	}
	helmURL := &cobra.Command{
		Use:   "gitrepo-helm-url-regex",
		Short: "Set helmRepoURLRegex on GitRepos that have a Helm secret but no pattern, from the chart repositories of their Bundles (once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, kc, err := kube.clients()
			if err != nil {
				return err
			}
			return migrate.GitRepoHelmURLRegex(cmd.Context(), api, kc, systemNamespace, cmd.OutOrStdout())
		},
	}
	kube.bind(helmURL)
	helmURL.Flags().StringVar(&systemNamespace, "system-namespace", systemNamespace, "where the ConfigMap recording that the migration ran lives (default $NAMESPACE, else cattle-fleet-system)")
	c.AddCommand(helmURL)
	return c
}
