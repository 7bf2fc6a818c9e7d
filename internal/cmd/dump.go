package cmd

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/dump"
)

func newDump() *cobra.Command {
	var kube kubeFlags
	var namespace string
	c := &cobra.Command{
		Use:   "dump [FILE]",
		Short: "Write every Fleet object of the manager into a gzipped tar archive (default fleet_dump.tgz), Secrets left out",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "fleet_dump.tgz"
			if len(args) == 1 {
				file = args[0]
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			f, err := os.Create(file)
			if err != nil {
				return err
			}
			n, err := dump.Run(cmd.Context(), dump.Options{Config: cfg, Namespace: namespace}, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("dump %s: %w", file, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d objects to %s\n", n, file)
			return nil
		},
	}
	kube.bind(c)
	c.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace's objects (and the cluster-scoped Contents); default all")
	return c
}
