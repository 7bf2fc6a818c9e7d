package cmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/historyapi"
)

type rollbackFlags struct {
	kube      kubeFlags
	namespace string
	to        string
	clusters  string
	reason    string
	release   bool
	now       bool
	output    string
}

// newRollback is `fleet rollback`: chosen clusters run an earlier revision again (ours).
func newRollback() *cobra.Command {
	f := &rollbackFlags{}
	c := &cobra.Command{
		Use:   "rollback BUNDLE|GITREPO|HELMOP (--to REVISION|COMMIT|TIME | --release)",
		Short: "Put clusters back to an earlier revision, held there until the next one",
		Long: "The chosen clusters (--clusters, a label selector; default every cluster that ran it) run\n" +
			"the revision --to names again, its content and options as the deployment history recorded\n" +
			"them (docs/history.md): a revision, a commit, or a time (RFC 3339: what each cluster ran\n" +
			"then). They are held there until the Bundle's next revision, or --release.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0])
		},
	}
	c.Flags().StringVarP(&f.namespace, "namespace", "n", "fleet-default", "namespace of the bundles")
	c.Flags().StringVar(&f.to, "to", "", "the revision, commit or time (RFC 3339) to return to")
	c.Flags().StringVar(&f.clusters, "clusters", "", "label selector of the clusters to roll back (default: all that ran it)")
	c.Flags().StringVar(&f.reason, "reason", "", "why, shown with the hold")
	c.Flags().BoolVar(&f.release, "release", false, "release the chosen clusters from their holds")
	c.Flags().BoolVar(&f.now, "now", false, "roll back at once where a RolloutPolicy applies (without it, through the policy's stages and gates)")
	c.Flags().StringVarP(&f.output, "output", "o", "", "json: what was held or released, as JSON")
	c.Flags().StringVar(&f.kube.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	c.Flags().StringVar(&f.kube.context, "context", "", "kubeconfig context to use")
	return c
}

func (f *rollbackFlags) run(cmd *cobra.Command, name string) error {
	if (f.to == "") == !f.release {
		return fmt.Errorf("give either --to or --release")
	}
	if f.output != "" && f.output != "json" {
		return fmt.Errorf("--output %q: only json is supported", f.output)
	}
	rb := historyapi.Rollback{To: f.to, Reason: f.reason, Release: f.release, Now: f.now, At: time.Now()}
	if f.clusters != "" {
		sel, err := labels.Parse(f.clusters)
		if err != nil {
			return fmt.Errorf("--clusters %q: %w", f.clusters, err)
		}
		rb.Clusters = sel
	}
	api, _, err := f.kube.clients()
	if err != nil {
		return err
	}
	done, err := rb.Run(api, f.namespace, name)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(done)
	}
	for _, d := range done {
		for _, h := range d.Holds {
			how := ""
			if h.Staged {
				how = ", through its RolloutPolicy's stages (its Rollout shows them)"
			}
			fmt.Fprintf(out, "bundle %s: %d clusters held at revision %s until its next revision%s: %s\n", d.Bundle, len(h.Clusters), h.Revision, how, strings.Join(h.Clusters, ", "))
		}
		if len(d.Released) > 0 {
			fmt.Fprintf(out, "bundle %s: %d clusters released: %s\n", d.Bundle, len(d.Released), strings.Join(d.Released, ", "))
		}
	}
	return nil
}
