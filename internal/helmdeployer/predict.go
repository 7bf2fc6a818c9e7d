package helmdeployer

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Predict renders a bundle's resources with a cluster's options as the agent deploys them, for
// `fleet plan`: the chart and its values, kustomize, and the agent's own stamps on every object
// (its object set's label and annotation, the keep policy, the forced namespace). What needs the
// cluster is left out: helm.valuesFrom, the fields comparePatches keep at their live values, and
// a template's .Capabilities (Helm's defaults stand in). bundleID is the BundleDeployment's name
// (the Bundle's).
func Predict(resources []fleet.BundleResource, opts *fleet.BundleDeploymentOptions, bundleID string) (string, error) {
	files, err := render.FromResources(resources)
	if err != nil {
		return "", err
	}
	name := render.ReleaseName(opts, bundleID)
	c, kustomize, err := render.Chart(files, opts, name)
	if err != nil {
		return "", err
	}
	values := map[string]any{}
	if opts.Helm != nil && opts.Helm.Values != nil {
		values = opts.Helm.Values.DeepCopy().Data
	}
	post := &postRenderer{setID: SetID(bundleID), keep: opts.KeepResources, deleteCRDs: opts.DeleteCRDResources, kustomize: kustomize,
		namespace: opts.TargetNamespace, namespaced: builtinNamespaced}
	return render.TemplateWith(c, values, name, render.Namespace(opts), post)
}

// clusterScoped are the built-in kinds that live outside namespaces; without a cluster to ask,
// every other kind counts as namespaced.
var clusterScoped = map[string]bool{
	"Namespace": true, "Node": true, "PersistentVolume": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"CustomResourceDefinition": true, "StorageClass": true, "PriorityClass": true, "IngressClass": true, "RuntimeClass": true,
	"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true, "ValidatingAdmissionPolicy": true,
	"ValidatingAdmissionPolicyBinding": true, "APIService": true, "CSIDriver": true, "CSINode": true, "VolumeAttachment": true,
	"CertificateSigningRequest": true, "FlowSchema": true, "PriorityLevelConfiguration": true,
}

func builtinNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	return !clusterScoped[gvk.Kind], nil
}
