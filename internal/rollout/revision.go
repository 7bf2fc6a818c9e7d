package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Revision names what a Bundle deploys: its content and every option that reaches a cluster.
// A change of it starts a new rollout; a change of anything else (labels, the commit of an
// unchanged folder, pausing) does not.
func Revision(b *fleet.Bundle, contentName string) string {
	data, _ := json.Marshal(struct {
		Content    string                        `json:"c"`
		ContentsID string                        `json:"i,omitempty"`
		Options    fleet.BundleDeploymentOptions `json:"o"`
		Targets    []fleet.BundleTarget          `json:"t,omitempty"`
		Helm       *fleet.BundleHelmOptions      `json:"h,omitempty"`
		DependsOn  []fleet.BundleRef             `json:"d,omitempty"`
		Values     string                        `json:"v,omitempty"`
	}{contentName, b.Spec.ContentsID, b.Spec.BundleDeploymentOptions, b.Spec.Targets, b.Spec.HelmOpOptions, b.Spec.DependsOn, b.Spec.ValuesHash})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

// Inputs is what b deploys at its revision, as a Rollout keeps it (RolloutStatus.Current): its
// Content and the options and targets each cluster's options are rendered from.
func Inputs(b *fleet.Bundle, contentName string) *fleet.RolloutRevision {
	in := &fleet.RolloutRevision{Revision: Revision(b, contentName), Content: contentName, ContentsID: b.Spec.ContentsID,
		Options: *b.Spec.BundleDeploymentOptions.DeepCopy(), HelmOpOptions: b.Spec.HelmOpOptions.DeepCopy()}
	for _, t := range b.Spec.Targets {
		in.Targets = append(in.Targets, *t.DeepCopy())
	}
	return in
}

// RevisionOf is the revision of Bundle b as stored (its Helm values kept in a values Secret
// stand in by spec.valuesHash): its Content is named after its manifest (or is the registry's
// contents ID). `fleet rollback` holds clusters over it, and the bundle controller compares it
// so: the next revision releases them.
func RevisionOf(b *fleet.Bundle) (string, error) {
	if b.Spec.ContentsID != "" {
		return Revision(b, b.Spec.ContentsID), nil
	}
	manifest, err := target.Manifest(b.Spec.Resources)
	if err != nil {
		return "", err
	}
	return Revision(b, target.ContentName(manifest)), nil
}

// BundleAt is Bundle b as revision kept had it: the revision's options, targets and contents
// ID over the rest of b. What the bundle controller deploys for a kept or held revision, and
// what the deployment history's diff renders.
func BundleAt(b *fleet.Bundle, kept *fleet.RolloutRevision) *fleet.Bundle {
	out := *b
	out.Spec.BundleDeploymentOptions, out.Spec.HelmOpOptions = *kept.Options.DeepCopy(), kept.HelmOpOptions.DeepCopy()
	out.Spec.Targets, out.Spec.ContentsID = nil, kept.ContentsID
	for _, t := range kept.Targets {
		out.Spec.Targets = append(out.Spec.Targets, *t.DeepCopy())
	}
	return &out
}
