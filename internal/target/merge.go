package target

import (
	"helm.sh/helm/v3/pkg/chartutil"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Merge lays a target customization over base options. A field the customization sets wins;
// Helm values and the namespace label and annotation maps merge key by key (the customization
// winning); overlays, compare patches and valuesFrom add to the base's. Booleans can only be
// switched on: an unset boolean cannot be told from false.
func Merge(base, custom fleet.BundleDeploymentOptions) fleet.BundleDeploymentOptions {
	out := *base.DeepCopy()
	c := custom.DeepCopy()

	setString(&out.DefaultNamespace, c.DefaultNamespace)
	setString(&out.TargetNamespace, c.TargetNamespace)
	setString(&out.ServiceAccount, c.ServiceAccount)
	if c.ForceSyncGeneration > 0 {
		out.ForceSyncGeneration = c.ForceSyncGeneration
	}
	out.KeepResources = out.KeepResources || c.KeepResources
	out.DeleteCRDResources = out.DeleteCRDResources || c.DeleteCRDResources
	out.DeleteNamespace = out.DeleteNamespace || c.DeleteNamespace
	if c.CreateNamespace != nil {
		out.CreateNamespace = c.CreateNamespace
	}

	if c.Kustomize != nil && c.Kustomize.Dir != "" {
		out.Kustomize = c.Kustomize
	}
	if c.YAML != nil && len(c.YAML.Overlays) > 0 {
		if out.YAML == nil {
			out.YAML = &fleet.YAMLOptions{}
		}
		out.YAML.Overlays = append(out.YAML.Overlays, c.YAML.Overlays...)
	}
	if c.Diff != nil && len(c.Diff.ComparePatches) > 0 {
		if out.Diff == nil {
			out.Diff = &fleet.DiffOptions{}
		}
		out.Diff.ComparePatches = append(out.Diff.ComparePatches, c.Diff.ComparePatches...)
	}
	if c.IgnoreOptions != nil && len(c.IgnoreOptions.Conditions) > 0 {
		out.IgnoreOptions = c.IgnoreOptions
	}
	if c.CorrectDrift != nil {
		out.CorrectDrift = c.CorrectDrift
	}
	out.NamespaceLabels = mergeStrings(out.NamespaceLabels, c.NamespaceLabels)
	out.NamespaceAnnotations = mergeStrings(out.NamespaceAnnotations, c.NamespaceAnnotations)
	if c.AllowedTargetNamespaceSelector != nil {
		out.AllowedTargetNamespaceSelector = c.AllowedTargetNamespaceSelector
	}
	if len(c.DownstreamResources) > 0 {
		out.DownstreamResources = c.DownstreamResources
	}
	if len(c.OverwrittenResources) > 0 {
		out.OverwrittenResources = c.OverwrittenResources
	}
	if c.Helm != nil {
		if out.Helm == nil {
			out.Helm = &fleet.HelmOptions{}
		}
		mergeHelm(out.Helm, c.Helm)
	}
	return out
}

func mergeHelm(out, c *fleet.HelmOptions) {
	setString(&out.Chart, c.Chart)
	setString(&out.Repo, c.Repo)
	setString(&out.ReleaseName, c.ReleaseName)
	setString(&out.Version, c.Version)
	if c.TimeoutSeconds > 0 {
		out.TimeoutSeconds = c.TimeoutSeconds
	}
	if c.MaxHistory > 0 {
		out.MaxHistory = c.MaxHistory
	}
	out.Force = out.Force || c.Force
	out.TakeOwnership = out.TakeOwnership || c.TakeOwnership
	out.WaitForJobs = out.WaitForJobs || c.WaitForJobs
	out.Atomic = out.Atomic || c.Atomic
	out.DisablePreProcess = out.DisablePreProcess || c.DisablePreProcess
	out.DisableDNS = out.DisableDNS || c.DisableDNS
	out.SkipSchemaValidation = out.SkipSchemaValidation || c.SkipSchemaValidation
	out.DisableDependencyUpdate = out.DisableDependencyUpdate || c.DisableDependencyUpdate
	out.ValuesFiles = append(out.ValuesFiles, c.ValuesFiles...)
	out.ValuesFrom = append(out.ValuesFrom, c.ValuesFrom...)
	out.TemplateValues = mergeStrings(out.TemplateValues, c.TemplateValues)
	if c.Values != nil {
		base := map[string]any{}
		if out.Values != nil {
			base = out.Values.Data
		}
		// CoalesceTables gives its first argument precedence: the customization's values win.
		out.Values = &fleet.GenericMap{Data: chartutil.CoalesceTables(c.Values.Data, base)}
	}
}

func setString(dst *string, v string) {
	if v != "" {
		*dst = v
	}
}

func mergeStrings(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
