package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clitarget "github.com/fleetgo/fleet/internal/cli/target"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
)

func newTarget() *cobra.Command {
	var (
		kube         kubeFlags
		bundleFile   string
		clustersFile string
		summary      bool
	)
	c := &cobra.Command{
		Use:   "target",
		Short: "Show the clusters Bundles match and the BundleDeployments that would result",
		Long: "Reads Bundles (for example from `fleet apply -o`) and matches them against the Clusters and\n" +
			"ClusterGroups of their namespaces, read from --clusters-file or from the manager.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in clitarget.Input
			if err := clitarget.ReadObjects(bundleFile, &in); err != nil {
				return err
			}
			if len(in.Bundles) == 0 {
				return fmt.Errorf("%s holds no Bundle", bundleFile)
			}
			if clustersFile != "" {
				if err := clitarget.ReadObjects(clustersFile, &in); err != nil {
					return err
				}
			} else if err := readLive(&kube, &in); err != nil {
				return err
			}
			results, err := clitarget.Plan(in)
			if err != nil {
				return err
			}
			return clitarget.Print(cmd.OutOrStdout(), results, !summary)
		},
	}
	kube.bind(c)
	c.Flags().StringVarP(&bundleFile, "bundle-file", "b", "", "YAML file with Bundles (required)")
	c.Flags().StringVar(&clustersFile, "clusters-file", "", "YAML file with Clusters and ClusterGroups, instead of reading the manager")
	c.Flags().BoolVar(&summary, "summary", false, "print only which clusters each Bundle targets")
	_ = c.MarkFlagRequired("bundle-file")
	return c
}

// readLive adds the Clusters and ClusterGroups of the bundles' namespaces from the manager.
func readLive(kube *kubeFlags, in *clitarget.Input) error {
	cfg, err := kube.restConfig()
	if err != nil {
		return err
	}
	f, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return err
	}
	api := f.Fleet().V1alpha1()
	seen := map[string]bool{}
	for _, b := range in.Bundles {
		if seen[b.Namespace] {
			continue
		}
		seen[b.Namespace] = true
		clusters, err := api.Cluster().List(b.Namespace, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing clusters in %s: %w", b.Namespace, err)
		}
		for i := range clusters.Items {
			in.Clusters = append(in.Clusters, &clusters.Items[i])
		}
		groups, err := api.ClusterGroup().List(b.Namespace, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing cluster groups in %s: %w", b.Namespace, err)
		}
		for i := range groups.Items {
			in.Groups = append(in.Groups, &groups.Items[i])
		}
	}
	return nil
}
