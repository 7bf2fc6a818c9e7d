package cmd

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/notify"
)

// newNotify is `fleet notify`: notifications (ours; Fleet has none).
func newNotify() *cobra.Command {
	var kube kubeFlags
	var namespace string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "notify",
		Short: "Notifications: send a test message through an Alert's provider",
		Long: "An Alert reports what changes do to the GitRepos, HelmOps and Bundles of its namespace through\n" +
			"its AlertProvider (Slack, Teams, a signed webhook, GitHub or GitLab commit checks).",
	}
	c.PersistentFlags().StringVarP(&namespace, "namespace", "n", "fleet-default", "namespace of the Alert")
	test := &cobra.Command{
		Use:   "test ALERT",
		Short: "Have the manager send a test message through the Alert's provider, and wait for it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, _, err := kube.clients()
			if err != nil {
				return err
			}
			return notify.Test(cmd.Context(), api.Alert(), namespace, args[0], timeout, time.Second, cmd.OutOrStdout())
		},
	}
	kube.bind(test)
	test.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the delivery")
	c.AddCommand(test)
	return c
}
