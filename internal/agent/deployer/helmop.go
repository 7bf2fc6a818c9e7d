package deployer

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// files are the bundle's files and the options to deploy them with. A HelmOp's BundleDeployment
// (helmChartOptions set) names a chart the agent fetches itself, with the credentials the
// manager copied into the cluster namespace: the chart is added to the files and helm.chart
// points at it, as for a chart fetched when the bundle was made.
func (h *handler) files(bd *fleet.BundleDeployment) (render.Files, fleet.BundleDeploymentOptions, error) {
	opts := *bd.Spec.Options.DeepCopy()
	files, err := h.manifestFiles(bd)
	if err == nil {
		files, err = h.unsealed(bd, files)
	}
	if err != nil || bd.Spec.HelmChartOptions == nil || opts.Helm == nil {
		return files, opts, err
	}
	auth, cleanup, err := h.chartAuth(bd)
	defer cleanup()
	if err != nil {
		return nil, opts, err
	}
	chart, version, err := bundlereader.FetchChart(h.ctx, opts.Helm, auth)
	if err != nil {
		return nil, opts, fmt.Errorf("helm chart of the HelmOp: %w", err)
	}
	withChart := render.Files{chart.Name: chart.Content}
	for name, data := range files {
		withChart[name] = data
	}
	opts.Helm.Chart, opts.Helm.Repo, opts.Helm.Version = chart.Name, "", version
	return withChart, opts, nil
}

// manifestFiles are the files of bd's manifest: from its Content, or from the registry that
// keeps them (ociContents), pulled with the manager's copy of the registry's Secret.
func (h *handler) manifestFiles(bd *fleet.BundleDeployment) (render.Files, error) {
	id := manifestID(bd.Spec.DeploymentID)
	if !bd.Spec.OCIContents {
		return h.contents.Files(id)
	}
	return h.contents.FilesFrom(id, func() ([]byte, error) {
		if h.upstream == nil {
			return nil, fmt.Errorf("contents %s are in a registry, and this agent reads no Secrets of the manager", id)
		}
		s, err := h.upstream.CoreV1().Secrets(bd.Namespace).Get(h.ctx, ocistorage.AgentSecretName(bd.Name), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("contents %s: the registry's secret: %w", id, err)
		}
		st, err := ocistorage.FromSecret(s.Data)
		if err != nil {
			return nil, fmt.Errorf("contents %s: secret %s: %w", id, s.Name, err)
		}
		return st.Pull(h.ctx, id)
	})
}

// chartAuth reads the chart source's credentials: the manager's copy of the HelmOp's
// helmSecretName (username, password, cacerts) and helmChartOptions' TLS settings. cleanup
// removes the CA file it may write.
func (h *handler) chartAuth(bd *fleet.BundleDeployment) (bundlereader.ChartAuth, func(), error) {
	o := bd.Spec.HelmChartOptions
	// An oci:// registry without TLS is reached over plain HTTP only when TLS checks are off.
	auth := bundlereader.ChartAuth{InsecureSkipTLSVerify: o.InsecureSkipTLSVerify, PlainHTTP: o.InsecureSkipTLSVerify}
	cleanup := func() {}
	ca := o.CABundle
	if o.SecretName != "" {
		if h.upstream == nil {
			return auth, cleanup, fmt.Errorf("helmSecretName %s: this agent cannot read the manager's copy", o.SecretName)
		}
		copyName := names.DownstreamCopy(bd.Name, o.SecretName)
		s, err := h.upstream.CoreV1().Secrets(h.ns).Get(h.ctx, copyName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return auth, cleanup, fmt.Errorf("helmSecretName %s: no copy in the cluster namespace yet (the manager copies it from namespace %s, where it must exist)",
				o.SecretName, bd.Labels[fleet.BundleNamespaceLabel])
		}
		if err != nil {
			return auth, cleanup, fmt.Errorf("helmSecretName %s: %w", o.SecretName, err)
		}
		auth.Username, auth.Password = string(s.Data["username"]), string(s.Data["password"])
		if len(ca) == 0 {
			ca = s.Data["cacerts"]
		}
	}
	cleanup, err := auth.TrustCA(ca)
	return auth, cleanup, err
}
