package target

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ClusterNamespace is where a cluster's BundleDeployments live. It is always derived from the
// Cluster's namespace and name, never read from status.namespace: an agent may patch its
// Cluster's status, and a namespace it chose there would steer the manager's writes and
// deletions (status.namespace only shows what the manager derived).
func ClusterNamespace(c *fleet.Cluster) string {
	return names.ClusterNamespace(c.Namespace, c.Name)
}

// Deployment is the BundleDeployment bundle b should have on the cluster of ci, given its match.
// The options are rendered for the cluster and staged and promoted alike; the rollout decides
// later whether promotion waits. contentName names the Content holding b's manifest.
func Deployment(b *fleet.Bundle, ci ClusterInfo, m *Match, contentName string) (*fleet.BundleDeployment, error) {
	opts := *m.Options.DeepCopy()
	if err := RenderValues(&opts, ci.Cluster); err != nil {
		return nil, err
	}
	id, err := DeploymentID(contentName, opts)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		fleet.BundleLabel:           b.Name,
		fleet.BundleNamespaceLabel:  b.Namespace,
		fleet.ClusterLabel:          ci.Cluster.Name,
		fleet.ClusterNamespaceLabel: ci.Cluster.Namespace,
		fleet.ContentNameLabel:      contentName,
	}
	// The Bundle's labels come along, as in Fleet: dependsOn selectors on the agent match them.
	for k, v := range b.Labels {
		if _, set := labels[k]; !set {
			labels[k] = v
		}
	}
	bd := &fleet.BundleDeployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "BundleDeployment"},
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: ClusterNamespace(ci.Cluster), Labels: labels},
		Spec: fleet.BundleDeploymentSpec{
			StagedOptions:      opts,
			StagedDeploymentID: id,
			Options:            *opts.DeepCopy(),
			DeploymentID:       id,
			DependsOn:          b.Spec.DependsOn,
			CorrectDrift:       opts.CorrectDrift,
			HelmChartOptions:   b.Spec.HelmOpOptions.DeepCopy(),
			OCIContents:        b.Spec.ContentsID != "",
			Paused:             b.Spec.Paused || ci.Cluster.Spec.Paused,
			// A scheduled cluster outside all of its windows gets nothing new.
			OffSchedule: ci.Cluster.Status.Scheduled && !ci.Cluster.Status.ActiveSchedule,
		},
	}
	return bd, nil
}
