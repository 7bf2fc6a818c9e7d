package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/bundlediff"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

func newBundleDiff() *cobra.Command {
	var kube kubeFlags
	var o bundlediff.Options
	var output string
	c := &cobra.Command{
		Use:   "bundlediff [--bundle NAME]",
		Short: "Show where clusters differ from what their Bundles deploy (drift the agents report)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: only json is supported", output)
			}
			o.JSON = output == "json"
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			f, err := fleetfactory.NewFactoryFromConfig(cfg)
			if err != nil {
				return err
			}
			_, err = bundlediff.Run(f.Fleet().V1alpha1(), o, cmd.OutOrStdout())
			return err
		},
	}
	kube.bind(c)
	c.Flags().StringVarP(&o.Namespace, "namespace", "n", fleet.DefaultNamespace, "namespace of the Bundles")
	c.Flags().StringVarP(&o.Bundle, "bundle", "b", "", "only this Bundle")
	c.Flags().StringVarP(&output, "output", "o", "", "json: the differences as a JSON array")
	return c
}
