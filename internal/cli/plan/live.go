package plan

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Live reads what the clusters hold now for the namespace's bundles of those names that belong
// to the GitRepo repo: each BundleDeployment's options and the Content its deployment ID names,
// rendered as its agent renders them. A name the repository's fleet.yaml gives may be another
// GitRepo's Bundle: that one's deployments are not read (the plan would print them into a pull
// request's comment). Reading needs get and list of BundleDeployments, get of Contents, and get of
// the options Secrets (in the clusters' namespaces) of deployments whose Helm values are kept
// there.
func Live(ctx context.Context, api fleetcontrollers.Interface, secrets corev1client.SecretsGetter, namespace, repo string,
	bundles []string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	contents := map[string][]fleet.BundleResource{}
	for _, name := range bundles {
		sel := labels.SelectorFromSet(labels.Set{fleet.BundleLabel: name, fleet.BundleNamespaceLabel: namespace, fleet.RepoLabel: repo}).String()
		list, err := api.BundleDeployment().List("", metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("bundledeployments of bundle %s: %w", name, err)
		}
		byCluster := map[string]string{}
		for i := range list.Items {
			bd := &list.Items[i]
			if bd.Spec.DeploymentID == "" {
				continue // nothing promoted there yet
			}
			id, _, _ := strings.Cut(bd.Spec.DeploymentID, ":")
			res, ok := contents[id]
			if !ok {
				if res, err = contentResources(api, id); err != nil {
					return nil, fmt.Errorf("bundle %s, cluster %s: %w", name, bd.Labels[fleet.ClusterLabel], err)
				}
				contents[id] = res
			}
			opts, err := bundlevalues.ReadDeploymentOptions(ctx, func(ctx context.Context, ns, name string) (*corev1.Secret, error) {
				return secrets.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			}, bd)
			manifest := ""
			if err == nil {
				manifest, err = helmdeployer.Predict(res, opts, bd.Name)
			}
			if err != nil {
				manifest = fmt.Sprintf("# rendering what runs failed: %v\n", err)
			}
			byCluster[bd.Labels[fleet.ClusterNamespaceLabel]+"/"+bd.Labels[fleet.ClusterLabel]] = manifest
		}
		out[name] = byCluster
	}
	return out, nil
}

func contentResources(api fleetcontrollers.Interface, name string) ([]fleet.BundleResource, error) {
	c, err := api.Content().Get(name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("content %s: %w", name, err)
	}
	return bundlereader.ContentResources(c)
}

// Read reads a checkout's bundle folders as ro says (a GitRepo's options), each on its own: a
// folder that fails is reported, the others still plan.
func Read(co *Checkout, paths []string, ro bundlereader.Options) (Side, error) {
	ro.KeepGoing, ro.Commit = true, co.Commit
	res, err := bundlereader.ReadAll(context.Background(), co.Dir, paths, ro)
	if err != nil {
		return Side{}, err
	}
	s := Side{Commit: co.Commit, Bundles: res.Bundles, Failed: map[string]string{}}
	for _, f := range res.Failed {
		s.Failed[f.Folder] = f.Err.Error()
	}
	return s, nil
}
