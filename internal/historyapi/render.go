package historyapi

import (
	"context"
	"fmt"

	kname "github.com/rancher/wrangler/v3/pkg/name"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/manifestdiff"
	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Manifests are what revision of Bundle ns/bundle deploys to cluster clusterNS/clusterName,
// rendered as its agent renders them, as `fleet plan` does: the revision's recorded inputs
// (Content, options, targets), targeted at the cluster as it is now. It reads, as the caller,
// the revision's record, its values Secret (when its Helm values are kept in one), its
// Content, the Bundle (when it still exists), the cluster and its namespace's groups.
func Manifests(api fleetcontrollers.Interface, secrets corev1client.SecretsGetter, ns, bundle, revision, clusterNS, clusterName string) (string, error) {
	what := fmt.Sprintf("revision %s of bundle %s/%s", revision, ns, bundle)
	rec, err := api.BundleRevision().Get(ns, kname.SafeConcatName(bundle, revision), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	in := rec.Spec.Inputs
	switch {
	case in == nil:
		return "", fmt.Errorf("%s: the deployment history did not record what it deploys (the Bundle had moved on when it was first seen)", what)
	case in.ContentsID != "":
		return "", fmt.Errorf("%s: its contents are in an OCI registry, which this manager does not read", what)
	case in.ValuesHash != "":
		// Its Helm values are in its values Secret, read with the caller's rights too.
		name := bundlevalues.RevisionSecretName(rec.Name)
		s, err := secrets.Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("%s: its Helm values: secret %s/%s: %w", what, ns, name, err)
		}
		if in, err = bundlevalues.RestoreRevision(in, s); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
	}
	content, err := api.Content().Get(in.Content, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("%s: its content %s: %w", what, in.Content, err)
	}
	res, err := bundlereader.ContentResources(content)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	b, err := api.Bundle().Get(ns, bundle, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		b, err = &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bundle}}, nil
	}
	if err != nil {
		return "", fmt.Errorf("bundle %s/%s: %w", ns, bundle, err)
	}
	opts, err := optionsFor(api, rollout.BundleAt(b, in), in.Content, clusterNS, clusterName)
	if err != nil {
		return "", fmt.Errorf("%s on cluster %s/%s: %w", what, clusterNS, clusterName, err)
	}
	out, err := helmdeployer.Predict(res, opts, bundle)
	if err != nil {
		return "", fmt.Errorf("%s on cluster %s/%s: rendering: %w", what, clusterNS, clusterName, err)
	}
	return out, nil
}

// optionsFor are the options Bundle b gives cluster clusterNS/clusterName, as the manager
// targets it.
func optionsFor(api fleetcontrollers.Interface, b *fleet.Bundle, content, clusterNS, clusterName string) (*fleet.BundleDeploymentOptions, error) {
	c, err := api.Cluster().Get(clusterNS, clusterName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	list, err := api.ClusterGroup().List(clusterNS, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	all := make([]*fleet.ClusterGroup, 0, len(list.Items))
	for i := range list.Items {
		all = append(all, &list.Items[i])
	}
	groups, err := target.Groups(c, all)
	if err != nil {
		return nil, err
	}
	ci := target.ClusterInfo{Cluster: c, Groups: groups}
	m, err := target.MatchCluster(b, ci)
	if err != nil {
		return nil, fmt.Errorf("targeting error: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("the revision does not target the cluster")
	}
	bd, err := target.Deployment(b, ci, m, content)
	if err != nil {
		return nil, err
	}
	return &bd.Spec.Options, nil
}

// Diff is the unified diff of what two revisions of Bundle ns/bundle deploy to a cluster
// (Manifests), Secrets' values redacted as `fleet plan` redacts them; "" when they deploy the
// same.
func Diff(api fleetcontrollers.Interface, secrets corev1client.SecretsGetter, ns, bundle, from, to, clusterNS, clusterName string) (string, error) {
	a, err := Manifests(api, secrets, ns, bundle, from, clusterNS, clusterName)
	if err != nil {
		return "", err
	}
	b, err := Manifests(api, secrets, ns, bundle, to, clusterNS, clusterName)
	if err != nil {
		return "", err
	}
	return manifestdiff.Diff(manifestdiff.NewRedactor(), a, b, "revision "+from, "revision "+to), nil
}
