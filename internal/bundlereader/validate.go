package bundlereader

import (
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var (
	// Helm's rule for release names: DNS labels joined by dots.
	releaseNameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	dnsLabelRe    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// validate checks what the YAML decoder cannot: keys fleet.yaml may not set, names, selectors,
// states and references. name is the Bundle's final name.
func validate(file, name string, fy *fleet.FleetYAML) error {
	var bad badInput = func(key, format string, args ...any) error {
		return &InputError{File: file, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	for key, set := range map[string]bool{
		"resources":          len(fy.Resources) > 0,
		"targetRestrictions": len(fy.TargetRestrictions) > 0,
		"contentsId":         fy.ContentsID != "",
		"valuesHash":         fy.ValuesHash != "",
		"helmOpOptions":      fy.HelmOpOptions != nil,
	} {
		if set {
			if key == "targetRestrictions" {
				// Restrictions widen what a bundle may reach; only the GitRepo sets them.
				return bad(key, "not allowed in fleet.yaml: the GitRepo's targets restrict its bundles")
			}
			return bad(key, "not allowed in fleet.yaml: fleet apply sets it")
		}
	}
	if fy.Name != "" && names.HelmReleaseName(fy.Name) != fy.Name {
		return bad("name", "%q is not a valid bundle name (lower case letters, digits and '-', at most %d characters)", fy.Name, names.MaxHelmReleaseName)
	}
	switch fy.TargetCustomizationMode {
	case "", "FirstMatch", "AllMatches":
	default:
		return bad("targetCustomizationMode", "%q is not one of FirstMatch, AllMatches", fy.TargetCustomizationMode)
	}
	if err := validateOptions(bad, "", &fy.BundleDeploymentOptions); err != nil {
		return err
	}
	if err := validateTargets(bad, fy); err != nil {
		return err
	}
	for i, dep := range fy.DependsOn {
		if err := validateDependency(bad, fmt.Sprintf("dependsOn[%d]", i), name, fy.Labels, dep); err != nil {
			return err
		}
	}
	return nil
}

// validateTargets checks the options and selectors of fleet.yaml's targets,
// targetCustomizations and overrideTargets.
func validateTargets(bad badInput, fy *fleet.FleetYAML) error {
	for _, own := range []struct {
		key  string
		list []fleet.BundleTarget
	}{{"targetCustomizations", fy.TargetCustomizations}, {"targets", fy.Targets}} {
		for i, t := range own.list {
			prefix := fmt.Sprintf("%s[%d].", own.key, i)
			if err := validateOptions(bad, prefix, &t.BundleDeploymentOptions); err != nil {
				return err
			}
			if err := validateSelector(bad, prefix+"clusterSelector", t.ClusterSelector); err != nil {
				return err
			}
			if err := validateSelector(bad, prefix+"clusterGroupSelector", t.ClusterGroupSelector); err != nil {
				return err
			}
		}
	}
	for i, t := range fy.OverrideTargets {
		prefix := fmt.Sprintf("overrideTargets[%d].", i)
		if err := validateSelector(bad, prefix+"clusterSelector", t.ClusterSelector); err != nil {
			return err
		}
		if err := validateSelector(bad, prefix+"clusterGroupSelector", t.ClusterGroupSelector); err != nil {
			return err
		}
	}
	return nil
}

// validateDependency checks one dependsOn entry of the bundle name with the labels.
func validateDependency(bad badInput, key, name string, own map[string]string, dep fleet.BundleRef) error {
	if dep.Name == "" && dep.Selector == nil {
		return bad(key, "needs a name or a selector")
	}
	if dep.Name == name {
		return bad(key+".name", "bundle %q cannot depend on itself", name)
	}
	if dep.Selector != nil {
		if err := validateSelector(bad, key+".selector", dep.Selector); err != nil {
			return err
		}
		sel, _ := metav1.LabelSelectorAsSelector(dep.Selector)
		if !sel.Empty() && sel.Matches(labels.Set(own)) {
			return bad(key+".selector", "selects bundle %q itself (its labels %v)", name, own)
		}
	}
	for j, s := range dep.AcceptedStates {
		if _, ok := fleet.StateRank[s]; !ok {
			return bad(fmt.Sprintf("%s.acceptedStates[%d]", key, j), "%q is not a bundle state", s)
		}
	}
	return nil
}

// badInput makes the InputError of a key of the file being checked.
type badInput func(key, format string, args ...any) error

func validateOptions(bad badInput, prefix string, o *fleet.BundleDeploymentOptions) error {
	for key, ns := range map[string]string{"defaultNamespace": o.DefaultNamespace, "namespace": o.TargetNamespace} {
		if ns != "" && (len(ns) > names.MaxDNSLabel || !dnsLabelRe.MatchString(ns)) {
			return bad(prefix+key, "%q is not a valid namespace name", ns)
		}
	}
	if o.Helm != nil && o.Helm.ReleaseName != "" {
		if len(o.Helm.ReleaseName) > names.MaxHelmReleaseName || !releaseNameRe.MatchString(o.Helm.ReleaseName) {
			return bad(prefix+"helm.releaseName", "%q is not a valid Helm release name (lower case letters, digits, '-' and '.', at most %d characters)", o.Helm.ReleaseName, names.MaxHelmReleaseName)
		}
	}
	if o.Helm != nil && o.Helm.TimeoutSeconds < 0 {
		return bad(prefix+"helm.timeoutSeconds", "must not be negative")
	}
	if err := validateSelector(bad, prefix+"allowedTargetNamespaceSelector", o.AllowedTargetNamespaceSelector); err != nil {
		return err
	}
	return nil
}

func validateSelector(bad badInput, key string, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return bad(key, "invalid label selector: %v", err)
	}
	return nil
}
