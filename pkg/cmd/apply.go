package cmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/bundlereader"
	"github.com/fleetgo/fleet/pkg/cli/apply"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

func newApply() *cobra.Command {
	var (
		o            apply.Options
		kube         kubeFlags
		labels       []string
		correctDrift fleet.CorrectDrift
		passwordFile string
		pathAuthFile string
		nsSelector   string
	)
	c := &cobra.Command{
		Use:   "apply [flags] NAME PATH...",
		Short: "Turn folders of a checkout into Bundles and write them to the manager",
		Long: "Every folder with a fleet.yaml (or fleet.yml) below the PATHs becomes a Bundle named NAME-PATH, and so\n" +
			"does a PATH holding manifests directly. Nothing is written unless every bundle is valid. After\n" +
			"writing, Bundles labelled with NAME that this run did not produce are deleted.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.Paths = args[0], args[1:]
			if o.Commit == "" {
				o.Commit = os.Getenv("COMMIT")
			}
			o.Labels = map[string]string{}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok {
					return fmt.Errorf("--label %q: want key=value", l)
				}
				o.Labels[k] = v
			}
			if correctDrift.Enabled {
				o.CorrectDrift = &correctDrift
			}
			if nsSelector != "" {
				sel, err := metav1.ParseToLabelSelector(nsSelector)
				if err != nil {
					return fmt.Errorf("--allowed-target-namespace-selector %q: %w", nsSelector, err)
				}
				o.AllowedTargetNamespaceSelector = sel
			}
			if passwordFile != "" {
				data, err := os.ReadFile(passwordFile)
				if err != nil {
					return fmt.Errorf("--password-file: %w", err)
				}
				o.ChartAuth.Password = strings.TrimSpace(string(data))
			}
			if pathAuthFile != "" {
				data, err := os.ReadFile(pathAuthFile)
				if err != nil {
					return fmt.Errorf("--helm-credentials-by-path-file: %w", err)
				}
				dir, err := os.MkdirTemp("", "fleet-apply-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if o.ChartAuthByPath, err = bundlereader.ParsePathCredentials(data, dir); err != nil {
					return fmt.Errorf("--helm-credentials-by-path-file %s: %w", pathAuthFile, err)
				}
			}
			if o.Output != "" {
				return apply.Run(cmd.Context(), o, nil, cmd.OutOrStdout())
			}
			cfg, err := kube.restConfig()
			if err != nil {
				return err
			}
			f, err := fleetfactory.NewFactoryFromConfig(cfg)
			if err != nil {
				return err
			}
			return apply.Run(cmd.Context(), o, f.Fleet().V1alpha1().Bundle(), cmd.OutOrStdout())
		},
	}
	kube.bind(c)
	fl := c.Flags()
	fl.StringVarP(&o.Namespace, "namespace", "n", fleet.LocalNamespace, "namespace of the Bundles")
	fl.StringVarP(&o.Output, "output", "o", "", "write the Bundles as YAML to this file (- for standard output) instead of to the cluster")
	fl.StringVar(&o.Root, "root", ".", "folder of the checkout; PATHs are relative to it")
	fl.StringVar(&o.TargetsFile, "targets-file", "", "YAML file with the GitRepo's targets (targets: [...])")
	fl.StringVar(&o.Commit, "commit", "", "git commit of the checkout (default $COMMIT)")
	fl.StringArrayVarP(&labels, "label", "l", nil, "label key=value for every Bundle (repeatable)")
	fl.StringVar(&o.ServiceAccount, "service-account", "", "downstream ServiceAccount the agent deploys as")
	fl.StringVar(&o.TargetNamespace, "target-namespace", "", "force every resource into this namespace")
	fl.StringVar(&nsSelector, "allowed-target-namespace-selector", "", "label selector (a=b,c in (d)) the downstream namespaces of every Bundle must match; agents refuse others")
	fl.BoolVar(&o.Paused, "paused", false, "create the Bundles paused")
	fl.BoolVar(&o.KeepResources, "keep-resources", false, "keep deployed resources when a Bundle is deleted")
	fl.BoolVar(&o.DeleteNamespace, "delete-namespace", false, "delete the target namespace when a Bundle is deleted")
	fl.BoolVar(&correctDrift.Enabled, "correct-drift", false, "put drifted resources back to their desired state")
	fl.BoolVar(&correctDrift.Force, "correct-drift-force", false, "recreate resources that cannot be patched back")
	fl.BoolVar(&correctDrift.KeepFailHistory, "correct-drift-keep-failed-history", false, "keep the Helm history of failed corrections")
	fl.StringVar(&o.ChartAuth.Username, "username", "", "username for Helm chart repositories and OCI registries")
	fl.StringVar(&passwordFile, "password-file", "", "file holding the password for Helm chart repositories and OCI registries")
	fl.StringVar(&pathAuthFile, "helm-credentials-by-path-file", "", "YAML of chart credentials per bundle folder (folder: {username, password, caBundle, insecureSkipVerify}), as in a helmSecretNameForPaths Secret")
	fl.StringVar(&o.ChartAuth.CAFile, "cacerts-file", "", "PEM file of CAs to trust for chart downloads")
	fl.BoolVar(&o.ChartAuth.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "do not verify TLS certificates of chart sources")
	fl.BoolVar(&o.ChartAuth.PlainHTTP, "plain-http", false, "talk to OCI registries over plain HTTP")
	return c
}
