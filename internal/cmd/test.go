package cmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlereader"
	clitarget "github.com/fleetgo/fleet/internal/cli/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func newTest() *cobra.Command {
	var (
		o            bundlereader.Options
		root         string
		clustersFile string
		clusterName  string
		labels       []string
	)
	c := &cobra.Command{
		Use:   "test [flags] NAME PATH...",
		Short: "Render the manifests each targeted cluster would get, as the agent renders them",
		Long: "Reads bundle folders like `fleet apply`, matches them against the Clusters of --clusters-file or\n" +
			"against one cluster described by --cluster-name and --cluster-label, and prints the final\n" +
			"manifests per cluster: values, templating, overlays and kustomize applied.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			bundles, err := bundlereader.Read(root, args[1:], o)
			if err != nil {
				return err
			}
			in := clitarget.Input{Bundles: bundles}
			if clustersFile != "" {
				if err := clitarget.ReadObjects(clustersFile, &in); err != nil {
					return err
				}
			} else {
				c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: o.Namespace, Labels: map[string]string{}}}
				for _, l := range labels {
					k, v, ok := strings.Cut(l, "=")
					if !ok {
						return fmt.Errorf("--cluster-label %q: want key=value", l)
					}
					c.Labels[k] = v
				}
				in.Clusters = append(in.Clusters, c)
				// Without a targets file, target the one cluster by name, as a GitRepo would.
				if len(o.Targets) == 0 {
					for _, b := range bundles {
						b.Spec.Targets = append(b.Spec.Targets, fleet.BundleTarget{ClusterName: clusterName})
					}
				}
			}
			results, err := clitarget.Plan(in)
			if err != nil {
				return err
			}
			return clitarget.Test(cmd.OutOrStdout(), in, results)
		},
	}
	fl := c.Flags()
	fl.StringVar(&root, "root", ".", "folder of the checkout; PATHs are relative to it")
	fl.StringVarP(&o.Namespace, "namespace", "n", fleet.LocalNamespace, "namespace of the Bundles and Clusters")
	fl.StringVar(&clustersFile, "clusters-file", "", "YAML file with Clusters and ClusterGroups to match")
	fl.StringVar(&clusterName, "cluster-name", "test", "name of the one cluster to render for, without --clusters-file")
	fl.StringArrayVar(&labels, "cluster-label", nil, "label key=value of that cluster (repeatable)")
	return c
}
