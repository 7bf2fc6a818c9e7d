package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/fleetgo/fleet/internal/cli/status"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

// `fleet status` reads the manager every defaultWatchInterval with --watch, each request
// bounded by statusRequestTimeout.
const (
	defaultWatchInterval = 2 * time.Second
	statusRequestTimeout = 15 * time.Second
)

type statusFlags struct {
	kube      kubeFlags
	namespace string
	all       bool
	output    string
	watch     bool
	interval  time.Duration
}

func newStatus() *cobra.Command {
	var f statusFlags
	c := &cobra.Command{
		Use:   "status [GITREPO]",
		Short: "Show where a GitRepo's commit is: its Bundles, on which clusters, and what stops it",
		Long: "Prints GitRepo -> commit -> Bundles -> clusters, with each one's state, ready counts, the\n" +
			"agents' last check-in and the first error, and the clusters still on an older commit.\n" +
			"--watch follows a rollout until every GitRepo shown is Ready at its latest commit.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := status.Options{Namespace: f.namespace, All: f.all}
			switch {
			case len(args) == 1 && f.all:
				return fmt.Errorf("give a GITREPO or --all, not both")
			case len(args) == 1:
				o.Name = args[0]
			case !f.all:
				return fmt.Errorf("give a GITREPO, or --all for every GitRepo of the namespace")
			}
			if f.output != "" && f.output != "json" {
				return fmt.Errorf("--output %q: only json is supported", f.output)
			}
			return runStatus(cmd.Context(), cmd.OutOrStdout(), &f, o)
		},
	}
	f.kube.bind(c)
	fl := c.Flags()
	fl.StringVarP(&f.namespace, "namespace", "n", "fleet-default", "namespace of the GitRepos (with --all and -n \"\": every namespace)")
	fl.BoolVar(&f.all, "all", false, "every GitRepo of the namespace")
	fl.StringVarP(&f.output, "output", "o", "", "json: the report as JSON, for scripts")
	fl.BoolVarP(&f.watch, "watch", "w", false, "follow the rollout until it is Ready, with a progress line")
	fl.DurationVar(&f.interval, "interval", defaultWatchInterval, "how often --watch reads the manager")
	return c
}

func runStatus(ctx context.Context, out io.Writer, f *statusFlags, o status.Options) error {
	cfg, err := f.kube.restConfig()
	if err != nil {
		return err
	}
	cfg.Timeout = statusRequestTimeout
	ff, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return err
	}
	api := ff.Fleet().V1alpha1()
	tty := false
	if file, ok := out.(*os.File); ok {
		tty = term.IsTerminal(int(file.Fd()))
	}
	style := status.Style{Color: tty && os.Getenv("NO_COLOR") == ""}
	last := ""
	for {
		r, err := status.Gather(api, o)
		if err != nil {
			return unreachable(cfg.Host, err)
		}
		style.Now = time.Now()
		switch {
		case f.output == "json" && (!f.watch || r.Ready()):
			return status.PrintJSON(out, r)
		case f.output == "json":
		case !f.watch:
			return status.Print(out, r, style)
		case tty:
			// Redraw in place: clear the screen, print the tree and the progress line.
			fmt.Fprint(out, "\x1b[H\x1b[2J")
			if err := status.Print(out, r, style); err != nil {
				return err
			}
			fmt.Fprintf(out, "\n%s\n", status.Progress(r))
		default:
			// Piped: the progress line when it changes, the tree once done.
			if p := status.Progress(r); p != last {
				fmt.Fprintln(out, p)
				last = p
			}
			if r.Ready() {
				return status.Print(out, r, style)
			}
		}
		if r.Ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(f.interval):
		}
	}
}

// unreachable says in one line that the manager could not be reached, when that is the error.
func unreachable(host string, err error) error {
	if os.IsTimeout(err) || isConnErr(err) {
		return fmt.Errorf("cannot reach the manager at %s: %v", host, err)
	}
	return err
}

func isConnErr(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || utilnet.IsConnectionRefused(err)
}
