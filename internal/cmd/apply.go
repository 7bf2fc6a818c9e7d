package cmd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/ocistorage"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

// applyFlags are fleet apply's flags that need work before they become bundlebuild.Options.
type applyFlags struct {
	kube           kubeFlags
	labels         []string
	correctDrift   fleet.CorrectDrift
	passwordFile   string
	pathAuthFile   string
	sshKeyFile     string
	gitCAFile      string
	nsSelector     string
	file           string
	syncGeneration int64
	helmBasicHTTP  bool
	helmInsecure   bool
	debug          bool
	debugLevel     int
	// Fleet's OCI content storage: accepted so scripts keep working, without effect here.
	ociRegistrySecret, ociReference, ociUsername, ociPasswordFile string
	ociBasicHTTP, ociInsecure                                     bool
}

func newApply() *cobra.Command {
	var (
		o bundlebuild.Options
		f applyFlags
	)
	c := &cobra.Command{
		Use:   "apply [flags] BUNDLE_NAME PATH...",
		Short: "Turn folders of a checkout into Bundles and write them to the manager (or as YAML)",
		Long: "Every folder with a fleet.yaml (or fleet.yml) below the PATHs becomes a Bundle named after\n" +
			"BUNDLE_NAME and the folder, and so does a PATH holding manifests (directly or in subfolders\n" +
			"without fleet.yaml). Nothing is written unless every bundle is valid. After writing, Bundles\n" +
			"labelled with BUNDLE_NAME that this run did not produce are deleted.\n\n" +
			"With -f FILE (- for standard input), FILE holds one whole Bundle, written as BUNDLE_NAME.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApply(cmd, &o, &f, args)
		},
	}
	bindApplyFlags(c.Flags(), &o, &f)
	bindApplySourceFlags(c.Flags(), &o, &f)
	return c
}

// bindApplyFlags binds Fleet's flags of fleet apply, with Fleet's names, short forms and
// environment variables.
func bindApplyFlags(fl *pflag.FlagSet, o *bundlebuild.Options, f *applyFlags) {
	fl.StringVarP(&o.Scan.OptionsFile, "bundle-file", "b", "", "name of the options file that replaces fleet.yaml in every bundle folder; its name without extension joins the bundle's name")
	fl.StringVar(&o.ChartAuth.CAFile, "cacerts-file", "", "PEM file of CAs to trust for chart downloads")
	fl.StringVar(&o.Commit, "commit", os.Getenv("COMMIT"), "git commit to label the Bundles with (default $COMMIT, else the commit checked out in --root)")
	fl.BoolVarP(&o.Compress, "compress", "c", false, "store every resource gzipped and base64-encoded")
	fl.StringVar(&f.kube.context, "context", "", "kubeconfig context to use")
	fl.BoolVar(&f.correctDrift.Enabled, "correct-drift", false, "put resources changed outside Fleet back to their desired state")
	fl.BoolVar(&f.correctDrift.Force, "correct-drift-force", false, "recreate resources that cannot be patched back")
	fl.BoolVar(&f.correctDrift.KeepFailHistory, "correct-drift-keep-fail-history", false, "keep the Helm history of failed corrections")
	fl.BoolVar(&f.debug, "debug", false, "log at debug level")
	fl.IntVar(&f.debugLevel, "debug-level", 0, "with --debug, the verbosity of client logs")
	fl.BoolVar(&o.DeleteNamespace, "delete-namespace", false, "delete the target namespace when a Bundle is deleted")
	fl.StringVarP(&f.file, "file", "f", "", "file holding one whole Bundle (YAML or JSON; - for standard input), written as BUNDLE_NAME")
	fl.StringVar(&f.pathAuthFile, "helm-credentials-by-path-file", "", "YAML of chart credentials per bundle folder (folder: {username, password, caBundle, insecureSkipVerify}), as in a helmSecretNameForPaths Secret")
	fl.StringVar(&o.HelmRepoURLRegex, "helm-repo-url-regex", "", "send chart credentials only to chart locations matching this regular expression (always, when empty)")
	fl.BoolVar(&o.KeepResources, "keep-resources", false, "keep deployed resources when a Bundle is deleted")
	fl.StringVarP(&f.kube.kubeconfig, "kubeconfig", "k", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fl.StringSliceVarP(&f.labels, "label", "l", nil, "labels key=value for every Bundle (comma-separated or repeated)")
	fl.StringVarP(&o.Namespace, "namespace", "n", envOr("NAMESPACE", fleet.LocalNamespace), "namespace of the Bundles")
	fl.StringVarP(&o.Output, "output", "o", "", "write the Bundles as YAML to this file (- for standard output) instead of to the cluster")
	fl.StringVar(&f.passwordFile, "password-file", "", "file holding the password for Helm chart repositories and OCI registries")
	fl.BoolVar(&o.Paused, "paused", false, "create the Bundles paused")
	fl.StringVarP(&o.ServiceAccount, "service-account", "a", "", "downstream ServiceAccount the agent deploys as")
	fl.StringVar(&f.sshKeyFile, "ssh-privatekey-file", "", "SSH private key for charts hosted in git over SSH")
	fl.StringVar(&f.gitCAFile, "git-cacerts-file", "", "PEM file of CAs to trust for charts hosted in git (git::), besides --cacerts-file (ours: a GitRepo's caBundle)")
	fl.Int64Var(&f.syncGeneration, "sync-generation", 0, "forceSyncGeneration of every Bundle: raising it redeploys")
	fl.StringVar(&o.TargetNamespace, "target-namespace", "", "force every resource into this namespace")
	fl.StringVar(&o.TargetsFile, "targets-file", "", "YAML file of targets and targetRestrictions added to every Bundle")
	fl.StringVar(&o.ChartAuth.Username, "username", os.Getenv("HELM_USERNAME"), "username for Helm chart repositories and OCI registries (default $HELM_USERNAME)")
	fl.BoolVar(&o.Scan.Driven, "driven-scan", false, "each PATH is exactly one bundle, DIR or DIR<sep>OPTIONS-FILE; nothing below is searched")
	fl.DurationVar(&o.ImageScanInterval, "image-scan-interval", 0, "interval of the ImageScans fleet.yaml declares without one (a GitRepo's imageScanInterval)")
	fl.StringVar(&o.Scan.DrivenSep, "driven-scan-sep", ":", "separator of folder and options file in --driven-scan paths")
	fl.IntVar(&o.MaxConcurrency, "bundle-creation-max-concurrency", envInt("FLEET_BUNDLE_CREATION_MAX_CONCURRENCY", bundlereader.DefaultMaxConcurrency), "bundles read at once (default $FLEET_BUNDLE_CREATION_MAX_CONCURRENCY, else 4)")
}

// bindApplySourceFlags binds the flags of chart sources and OCI content storage (Fleet's), and
// ours.
func bindApplySourceFlags(fl *pflag.FlagSet, o *bundlebuild.Options, f *applyFlags) {
	fl.BoolVar(&f.helmBasicHTTP, "helm-basic-http", false, "talk to chart repositories and OCI registries over plain HTTP")
	fl.BoolVar(&f.helmInsecure, "helm-insecure-skip-tls", false, "do not verify TLS certificates of chart sources")
	fl.StringVar(&f.ociRegistrySecret, "oci-registry-secret", "", "Secret (type fleet.cattle.io/bundle-oci-storage/v1alpha1) of the namespace naming the OCI registry that keeps the Bundles' contents")
	fl.StringVar(&f.ociReference, "oci-reference", "", "OCI repository (host[:port]/path) that keeps the Bundles' contents: they hold none, only its ID (spec.contentsId)")
	fl.StringVar(&f.ociUsername, "ociusername", "", "user pushing to --oci-reference")
	fl.StringVar(&f.ociPasswordFile, "oci-password-file", "", "file holding --ociusername's password")
	fl.BoolVar(&f.ociBasicHTTP, "oci-basic-http", false, "reach --oci-reference over plain HTTP")
	fl.BoolVar(&f.ociInsecure, "oci-insecure", false, "reach --oci-reference without checking its TLS certificate")
	// Ours.
	fl.StringVar(&o.Root, "root", ".", "folder of the checkout; PATHs are relative to it")
	fl.StringVar(&f.nsSelector, "allowed-target-namespace-selector", "", "label selector (a=b,c in (d)) the downstream namespaces of every Bundle must match; agents refuse others")
	fl.BoolVar(&o.ChartAuth.InsecureSkipTLSVerify, "insecure-skip-tls-verify", false, "same as --helm-insecure-skip-tls")
	fl.BoolVar(&o.ChartAuth.PlainHTTP, "plain-http", false, "same as --helm-basic-http")
	fl.BoolVar(&f.correctDrift.KeepFailHistory, "correct-drift-keep-failed-history", false, "same as --correct-drift-keep-fail-history")
	_ = fl.MarkHidden("correct-drift-keep-failed-history")
}

func runApply(cmd *cobra.Command, o *bundlebuild.Options, f *applyFlags, args []string) error {
	setupLogging(false, f.debug)
	o.Log = cmd.ErrOrStderr()
	if err := f.complete(o, args, cmd.InOrStdin()); err != nil {
		return err
	}
	cleanup, err := f.readCredentials(o)
	defer cleanup()
	if err != nil {
		return err
	}
	if o.Output != "" {
		return bundlebuild.Run(cmd.Context(), *o, nil, cmd.OutOrStdout())
	}
	cfg, err := f.kube.restConfig()
	if err != nil {
		return err
	}
	if o.OCI, err = f.ociStorage(cmd.Context(), cfg, o.Namespace); err != nil {
		return err
	}
	fac, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return err
	}
	o.ImageScans = fac.Fleet().V1alpha1().ImageScan()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	o.Secrets = kube.CoreV1()
	return bundlebuild.Run(cmd.Context(), *o, fac.Fleet().V1alpha1().Bundle(), cmd.OutOrStdout())
}

// ociStorage is the registry that --oci-reference (with --ociusername, --oci-password-file,
// --oci-basic-http, --oci-insecure) or --oci-registry-secret (a Secret of namespace ns) names;
// nil when none does.
func (f *applyFlags) ociStorage(ctx context.Context, cfg *rest.Config, ns string) (*ocistorage.Storage, error) {
	switch {
	case f.ociRegistrySecret != "":
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, f.ociRegistrySecret, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("--oci-registry-secret: %w", err)
		}
		st, err := ocistorage.FromSecret(s.Data)
		if err != nil {
			return nil, fmt.Errorf("--oci-registry-secret %s: %w", f.ociRegistrySecret, err)
		}
		return &st, nil
	case f.ociReference != "":
		st := ocistorage.Storage{Reference: strings.TrimPrefix(f.ociReference, "oci://"), Username: f.ociUsername,
			BasicHTTP: f.ociBasicHTTP, Insecure: f.ociInsecure}
		if f.ociPasswordFile != "" {
			data, err := os.ReadFile(f.ociPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("--oci-password-file: %w", err)
			}
			st.Password = strings.TrimSpace(string(data))
		}
		return &st, nil
	}
	return nil, nil
}

// complete turns the arguments and the flags that need work into options.
func (f *applyFlags) complete(o *bundlebuild.Options, args []string, stdin io.Reader) error {
	o.Name, o.Paths = args[0], args[1:]
	if f.file != "" {
		if len(args) != 1 {
			return fmt.Errorf("with --file, give only the bundle's name (BUNDLE_NAME), no paths")
		}
		o.BundleReader = stdin
		if f.file != "-" {
			data, err := os.ReadFile(f.file)
			if err != nil {
				return fmt.Errorf("--file: %w", err)
			}
			o.BundleReader = bytes.NewReader(data)
		}
	}
	o.SyncGeneration = f.syncGeneration
	if o.Commit == "" {
		o.Commit = checkedOutCommit(o.Root)
	}
	o.Labels = map[string]string{}
	for _, l := range f.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("--label %q: want key=value", l)
		}
		o.Labels[k] = v
	}
	if f.correctDrift.Enabled {
		cd := f.correctDrift
		o.CorrectDrift = &cd
	}
	o.ChartAuth.PlainHTTP = o.ChartAuth.PlainHTTP || f.helmBasicHTTP
	o.ChartAuth.InsecureSkipTLSVerify = o.ChartAuth.InsecureSkipTLSVerify || f.helmInsecure
	if f.nsSelector != "" {
		sel, err := metav1.ParseToLabelSelector(f.nsSelector)
		if err != nil {
			return fmt.Errorf("--allowed-target-namespace-selector %q: %w", f.nsSelector, err)
		}
		o.AllowedTargetNamespaceSelector = sel
	}
	return nil
}

// readCredentials reads the chart credentials the flags name into the options; cleanup removes
// the files the per-path credentials were written to.
func (f *applyFlags) readCredentials(o *bundlebuild.Options) (cleanup func(), err error) {
	cleanup = func() {}
	if f.passwordFile != "" {
		data, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return cleanup, fmt.Errorf("--password-file: %w", err)
		}
		o.ChartAuth.Password = strings.TrimSpace(string(data))
	}
	if f.sshKeyFile != "" {
		if o.ChartAuth.SSHPrivateKey, err = os.ReadFile(f.sshKeyFile); err != nil {
			return cleanup, fmt.Errorf("--ssh-privatekey-file: %w", err)
		}
	}
	if f.gitCAFile != "" {
		if o.ChartAuth.GitCABundle, err = os.ReadFile(f.gitCAFile); err != nil {
			return cleanup, fmt.Errorf("--git-cacerts-file: %w", err)
		}
	}
	if f.pathAuthFile == "" {
		return cleanup, nil
	}
	data, err := os.ReadFile(f.pathAuthFile)
	if err != nil {
		return cleanup, fmt.Errorf("--helm-credentials-by-path-file: %w", err)
	}
	dir, err := os.MkdirTemp("", "fleet-apply-")
	if err != nil {
		return cleanup, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if o.ChartAuthByPath, err = bundlereader.ParsePathCredentials(data, dir); err != nil {
		return cleanup, fmt.Errorf("--helm-credentials-by-path-file %s: %w", f.pathAuthFile, err)
	}
	return cleanup, nil
}

// checkedOutCommit is the commit checked out in dir, as Fleet labels Bundles without --commit;
// "" outside a git checkout.
func checkedOutCommit(dir string) string {
	c := exec.Command("git", "rev-parse", "HEAD")
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}
