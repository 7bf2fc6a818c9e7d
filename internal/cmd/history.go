package cmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/cli/history"
	"github.com/fleetgo/fleet/internal/historyapi"
)

type historyFlags struct {
	kube      kubeFlags
	namespace string
	cluster   string
	at        string
	revision  string
	output    string
}

// newHistory is `fleet history`: what ran where, and when (ours; Fleet keeps no history).
func newHistory() *cobra.Command {
	f := &historyFlags{}
	c := &cobra.Command{
		Use:   "history [BUNDLE|GITREPO|HELMOP]",
		Short: "Show which revision each cluster ran, from when until when",
		Long: "The manager records, per Bundle and cluster, every revision it ran (docs/history.md).\n" +
			"Without --cluster or --at: each revision, how many clusters ran it and run it now.\n" +
			"--cluster C: what C ran, span by span. --at TIME: what each cluster ran then.\n" +
			"--revision R: which clusters ran revision (or commit) R, span by span.\n" +
			"Without a NAME, --cluster and --at ask every Bundle of the namespace.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args)
		},
	}
	c.Flags().StringVarP(&f.namespace, "namespace", "n", "fleet-default", "namespace of the bundles")
	c.Flags().StringVar(&f.cluster, "cluster", "", "the cluster to tell about")
	c.Flags().StringVar(&f.at, "at", "", "the moment to tell about (RFC 3339, or now)")
	c.Flags().StringVar(&f.revision, "revision", "", "which clusters ran this revision (or commit), span by span")
	c.Flags().StringVarP(&f.output, "output", "o", "", "json: the rows as JSON")
	c.Flags().StringVar(&f.kube.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	c.Flags().StringVar(&f.kube.context, "context", "", "kubeconfig context to use")
	return c
}

func (f *historyFlags) run(cmd *cobra.Command, args []string) error {
	if f.output != "" && f.output != "json" {
		return fmt.Errorf("--output %q: only json is supported", f.output)
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	} else if f.cluster == "" || f.at == "" {
		return fmt.Errorf("name a Bundle, GitRepo or HelmOp, or ask about every Bundle with --cluster and --at")
	}
	q := history.Query{Cluster: f.cluster, Revision: f.revision}
	if f.at != "" {
		at, err := history.ParseTime(f.at, time.Now())
		if err != nil {
			return err
		}
		q.At = &at
	}
	api, _, err := f.kube.clients()
	if err != nil {
		return err
	}
	bundles, err := historyapi.Find(api, f.namespace, name)
	if err != nil {
		return err
	}
	rows, err := history.Rows(bundles, q)
	if err != nil {
		return err
	}
	if f.output == "json" {
		return history.PrintJSON(cmd.OutOrStdout(), rows)
	}
	history.Print(cmd.OutOrStdout(), rows, q)
	return nil
}
