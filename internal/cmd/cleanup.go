package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/cli/cleanup"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

func newCleanup() *cobra.Command {
	c := &cobra.Command{
		Use:   "cleanup",
		Short: "Delete what the manager is done with: superseded cluster registrations, finished GitRepo Jobs",
	}
	var kube kubeFlags
	var o cleanup.Options
	regs := &cobra.Command{
		Use:   "clusterregistration",
		Short: "Delete granted ClusterRegistrations superseded by a newer one of the same agent, or whose Cluster is gone",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			f, err := fleetfactory.NewFactoryFromConfig(cfg)
			if err != nil {
				return err
			}
			n, err := cleanup.ClusterRegistrations(cmd.Context(), f.Fleet().V1alpha1(), o, cmd.OutOrStdout())
			fmt.Fprintf(cmd.OutOrStdout(), "%d clusterregistrations\n", n)
			return err
		},
	}
	jobs := &cobra.Command{
		Use:   "gitjob",
		Short: "Delete GitRepo Jobs that succeeded, with their pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			k, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			n, err := cleanup.GitJobs(cmd.Context(), k, o, cmd.OutOrStdout())
			fmt.Fprintf(cmd.OutOrStdout(), "%d jobs\n", n)
			return err
		},
	}
	for _, sub := range []*cobra.Command{regs, jobs} {
		kube.bind(sub)
		sub.Flags().BoolVar(&o.DryRun, "dry-run", false, "say what would be deleted, delete nothing")
		c.AddCommand(sub)
	}
	return c
}
