package cmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

type rolloutFlags struct {
	kube      kubeFlags
	namespace string
}

// newRollout is `fleet rollout`: progressive rollouts by a RolloutPolicy (ours; Fleet has none).
func newRollout() *cobra.Command {
	f := &rolloutFlags{}
	c := &cobra.Command{
		Use:   "rollout",
		Short: "Follow and steer progressive rollouts: status, approve, pause, resume, abort, retry",
		Long: "A GitRepo, HelmOp or Bundle with the fleetgo.io/rollout-policy annotation rolls out stage by\n" +
			"stage as its RolloutPolicy says; the manager keeps a Rollout per Bundle. NAME is a Bundle's\n" +
			"Rollout, or a GitRepo or HelmOp (all of its Bundles' Rollouts).",
	}
	c.PersistentFlags().StringVarP(&f.namespace, "namespace", "n", "fleet-default", "namespace of the rollouts")
	c.PersistentFlags().StringVar(&f.kube.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	c.PersistentFlags().StringVar(&f.kube.context, "context", "", "kubeconfig context to use")
	c.AddCommand(f.statusCmd())
	var stage string
	approve := f.actionCmd("approve", "Approve the stage waiting for approval (or --stage)", func() rollout.Action { return rollout.Approve(stage) })
	approve.Flags().StringVar(&stage, "stage", "", "the stage to approve (default: the one waiting)")
	c.AddCommand(approve,
		f.actionCmd("pause", "Promote no more clusters (what is deployed stays; gates and soak go on)", func() rollout.Action { return rollout.Pause(true) }),
		f.actionCmd("resume", "Promote clusters again", func() rollout.Action { return rollout.Pause(false) }),
		f.actionCmd("abort", "Stop the rollout and roll its updated clusters back", func() rollout.Action { return rollout.Abort }),
		f.actionCmd("retry", "Start a halted or aborted rollout again from its first stage", func() rollout.Action { return rollout.Retry }))
	return c
}

func (f *rolloutFlags) statusCmd() *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a rollout's stages, what it waits for, and which cluster failed which gate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: only json is supported", output)
			}
			_, rs, err := f.find(args[0])
			if err != nil {
				return err
			}
			if output == "json" {
				return rollout.PrintJSON(cmd.OutOrStdout(), rs)
			}
			rollout.Print(cmd.OutOrStdout(), rs)
			return nil
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "", "json: the rollouts as JSON")
	return c
}

func (f *rolloutFlags) actionCmd(use, short string, act func() rollout.Action) *cobra.Command {
	return &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, rs, err := f.find(args[0])
			if err != nil {
				return err
			}
			return rollout.Apply(cmd.OutOrStdout(), c, rs, act())
		},
	}
}

// find connects to the manager and finds the Rollouts NAME stands for.
func (f *rolloutFlags) find(name string) (fleetcontrollers.RolloutClient, []fleet.Rollout, error) {
	api, _, err := f.kube.clients()
	if err != nil {
		return nil, nil, err
	}
	rs, err := rollout.Find(api.Rollout(), f.namespace, name)
	return api.Rollout(), rs, err
}
