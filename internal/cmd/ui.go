package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/ui"
)

// newUI is `fleet ui`: the web UI, served locally with the user's own credential.
func newUI() *cobra.Command {
	var (
		kube       kubeFlags
		addr, auth string
		inCluster  bool
		limits     = ui.DefaultLimits
	)
	c := &cobra.Command{
		Use:   "ui",
		Short: "Serve a web UI of GitRepos, HelmOps, Bundles, clusters and rollouts, acting with your kubeconfig's credential",
		Long: "Serves the UI on --addr (127.0.0.1 by default: only this machine reaches it). Every page is read, and\n" +
			"every action taken, with the kubeconfig's credential: the UI sees and does exactly what you may.\n" +
			"Pages update live; actions (pause, resume, force redeploy, approve or abort a rollout) are one API\n" +
			"write each, and a refusal shows the apiserver's message.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if inCluster {
				// Many viewers, each acting with their own token; the pod's own credential is
				// dropped (ui.NewViewers), so the UI can do nothing by itself.
				cfg, err := rest.InClusterConfig()
				if err != nil {
					return err
				}
				return ui.RunViewers(cmd.Context(), addr, cfg, auth, limits)
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			return ui.Run(cmd.Context(), addr, cfg, func(url string) {
				fmt.Fprintf(cmd.OutOrStdout(), "fleet ui on %s\n(the URL carries this run's secret: only a browser that opened it is served)\n", url)
			})
		},
	}
	kube.bind(c)
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:8088", "address to listen on")
	c.Flags().BoolVar(&inCluster, "in-cluster", false, "serve many viewers in the cluster, each with their own credential (see --auth)")
	c.Flags().StringVar(&auth, "auth", ui.AuthToken, "with --in-cluster: token (viewers sign in with a bearer token) or header (an authenticating proxy passes it as Authorization: Bearer)")
	c.Flags().IntVar(&limits.Viewers, "max-viewers", limits.Viewers, "with --in-cluster: identities signed in at once (each keeps one set of watches: see docs/ui.md for the memory each takes)")
	c.Flags().IntVar(&limits.SessionsPerViewer, "max-sessions-per-viewer", limits.SessionsPerViewer, "with --in-cluster: sessions one identity keeps (one more ends its least recently used)")
	c.Flags().IntVar(&limits.Streams, "max-live-pages", limits.Streams, "with --in-cluster: live-updating pages open at once across all viewers")
	return c
}
