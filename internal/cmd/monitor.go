package cmd

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/monitor"
)

func newMonitor() *cobra.Command {
	var (
		kube      kubeFlags
		namespace string
		interval  time.Duration
		count     int
	)
	c := &cobra.Command{
		Use:   "monitor",
		Short: "Write snapshots of the manager's GitRepos, Bundles, BundleDeployments and Clusters with the issues found, as JSON lines",
		Long: "Each snapshot holds the fields that tell whether a rollout moves (generations, commits,\n" +
			"deployment IDs applied or not, states, check-ins) and the issues found: NotReady,\n" +
			"GenerationNotObserved, CommitNotApplied, NotApplied, ContentMissing, NoBundle, Offline,\n" +
			"NoClusterNamespace. With --interval it takes --count snapshots (0: until interrupted);\n" +
			"`fleet analyze` reads them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, _, err := kube.clients()
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for n := 0; count == 0 || n < count; n++ {
				if n > 0 {
					select {
					case <-cmd.Context().Done():
						return nil
					case <-time.After(interval):
					}
				}
				s, err := monitor.Take(api, namespace, time.Now())
				if err != nil {
					return err
				}
				if err := enc.Encode(s); err != nil {
					return err
				}
				if interval <= 0 {
					return nil
				}
			}
			return nil
		},
	}
	kube.bind(c)
	fl := c.Flags()
	fl.StringVarP(&namespace, "namespace", "n", "", "only this namespace's objects; default all")
	fl.DurationVar(&interval, "interval", 0, "take a snapshot every interval (0: one snapshot)")
	fl.IntVar(&count, "count", 1, "with --interval, how many snapshots (0: until interrupted)")
	return c
}

func newAnalyze() *cobra.Command {
	var detailed bool
	c := &cobra.Command{
		Use:   "analyze [FILE...]",
		Short: "Summarize `fleet monitor` snapshots (standard input when no FILE): issues by type, and what changed between the first and the last",
		RunE: func(cmd *cobra.Command, args []string) error {
			var readers []io.Reader
			for _, name := range args {
				if name == "-" {
					readers = append(readers, cmd.InOrStdin())
					continue
				}
				f, err := os.Open(name)
				if err != nil {
					return err
				}
				defer f.Close()
				readers = append(readers, f)
			}
			if len(readers) == 0 {
				readers = append(readers, cmd.InOrStdin())
			}
			snaps, err := monitor.Read(io.MultiReader(readers...))
			if err != nil {
				return fmt.Errorf("analyze: %w", err)
			}
			monitor.Analyze(snaps, cmd.OutOrStdout(), detailed)
			return nil
		},
	}
	c.Flags().BoolVarP(&detailed, "detailed", "d", false, "list every issue of the newest snapshot with its message")
	return c
}
