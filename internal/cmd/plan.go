package cmd

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/cli/plan"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// githubCommentLimit keeps a Markdown plan under GitHub's 65,536-character comment limit.
const githubCommentLimit = 60000

type planFlags struct {
	kube                        kubeFlags
	repo, base, head            string
	name, namespace, gitRepo    string
	targetsFile, clustersFile   string
	output, artifact, manifests string
	live, exportClusters, color bool
	detailedExitCode            bool
	maxLength                   int
}

func newPlan() *cobra.Command {
	f := &planFlags{}
	c := &cobra.Command{
		Use:   "plan [flags] [PATH...]",
		Short: "Show what a change would do to each cluster: per bundle, the clusters that change and the diff of their manifests",
		Long: "Reads the repository at --base and at --head (default: the working tree) as a GitRepo reads it,\n" +
			"targets both at the clusters (the manager's, read-only, or --clusters-file from\n" +
			"`fleet plan --export-clusters`), renders each cluster's manifests as its agent would, and\n" +
			"prints per bundle the clusters whose manifests change, are added or removed, with the unified\n" +
			"diff; clusters with the same diff are one group. --live compares head with what the clusters\n" +
			"hold now and flags those that differ from base. Secrets' values never appear.\n\n" +
			"It exits 1 when a bundle could not be planned (a broken fleet.yaml, a chart it cannot fetch),\n" +
			"after printing the report; with --detailed-exitcode, 2 when clusters change and 0 when none do.",
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	f.kube.bind(c)
	fl := c.Flags()
	fl.StringVar(&f.repo, "repo", ".", "the git checkout")
	fl.StringVar(&f.base, "base", "", "the revision the change starts from (branch, tag, commit); required unless --live")
	fl.StringVar(&f.head, "head", "", "the revision of the change (default: the working tree as it is)")
	fl.StringVar(&f.name, "name", "", "the GitRepo's name, which prefixes bundle names (default: the checkout folder's name)")
	fl.StringVarP(&f.namespace, "namespace", "n", "fleet-default", "namespace of the GitRepo and its clusters")
	fl.StringVar(&f.gitRepo, "gitrepo", "", "take name, paths, targets and options from this GitRepo on the manager")
	fl.StringVar(&f.targetsFile, "targets-file", "", "YAML file of targets (a GitRepo's, as fleet apply takes them)")
	fl.StringVar(&f.clustersFile, "clusters-file", "", "plan against the Clusters and ClusterGroups of this file, not the manager's")
	fl.BoolVar(&f.exportClusters, "export-clusters", false, "write the namespace's Clusters and ClusterGroups for --clusters-file, and stop")
	fl.BoolVar(&f.live, "live", false, "compare head with what the clusters hold now (flags drift from base when --base is set)")
	fl.StringVarP(&f.output, "output", "o", "text", "text, markdown (a pull-request comment) or json")
	fl.IntVar(&f.maxLength, "max-length", githubCommentLimit, "markdown: cap the comment at this many bytes (0: no cap)")
	fl.StringVar(&f.artifact, "artifact", "", "also write the whole report, uncapped, to this file (in the -o format)")
	fl.BoolVar(&f.color, "color", false, "colour the text output even when not a terminal")
	fl.BoolVar(&f.detailedExitCode, "detailed-exitcode", false, "exit 0 when no cluster changes, 2 when some do (1 stays an error)")
	fl.StringVar(&f.manifests, "manifests", "", "also write head's manifests per bundle and cluster into this folder (<bundle>/<namespace>_<cluster>.yaml)")
	return c
}

func (f *planFlags) run(ctx context.Context, out io.Writer, paths []string) error {
	switch f.output {
	case "text", "markdown", "json":
	default:
		return fmt.Errorf("--output %q: text, markdown or json", f.output)
	}
	var api fleetcontrollers.Interface
	var kube kubernetes.Interface
	if f.exportClusters || f.clustersFile == "" || f.live || f.gitRepo != "" {
		var err error
		if api, kube, err = f.kube.clients(); err != nil {
			return err
		}
	}
	if f.exportClusters {
		return plan.ExportClusters(ctx, out, api, kube, f.namespace)
	}
	if f.base == "" && !f.live {
		return fmt.Errorf("--base is required (or --live, to compare with what the clusters hold)")
	}
	in, err := plan.Prepare(ctx, plan.Request{Repo: f.repo, Base: f.base, Head: f.head, Name: f.name, Namespace: f.namespace,
		GitRepo: f.gitRepo, TargetsFile: f.targetsFile, ClustersFile: f.clustersFile, Live: f.live, Paths: paths}, api, kube)
	if err != nil {
		return err
	}
	report, err := plan.Run(in)
	if err != nil {
		return err
	}
	if f.manifests != "" {
		if err := report.WriteManifests(f.manifests); err != nil {
			return err
		}
	}
	if err := f.print(out, report); err != nil {
		return err
	}
	return f.exit(report)
}

// exit is the outcome the exit status gives: an error when a bundle could not be planned, and
// with --detailed-exitcode, 2 when clusters change.
func (f *planFlags) exit(r *plan.Report) error {
	if n := r.Errors(); n > 0 {
		return fmt.Errorf("%d bundle(s) could not be planned; the report says why", n)
	}
	if f.detailedExitCode && r.Changes() > 0 {
		return &ExitCode{Code: 2}
	}
	return nil
}

func (f *planFlags) print(out io.Writer, r *plan.Report) error {
	write := func(w io.Writer, capped bool) error {
		switch f.output {
		case "json":
			return plan.JSON(w, r)
		case "markdown":
			max := 0
			if capped {
				max = f.maxLength
			}
			_, err := plan.Markdown(w, r, max, f.artifact)
			return err
		}
		color := f.color
		if file, ok := w.(*os.File); ok && !color {
			color = term.IsTerminal(int(file.Fd()))
		}
		return plan.Text(w, r, color)
	}
	if f.artifact != "" {
		a, err := os.Create(f.artifact)
		if err != nil {
			return err
		}
		err = write(a, false)
		if cerr := a.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return write(out, true)
}
