package content

import (
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// revisionByContent indexes BundleRevisions by the Content of the inputs they recorded: a
// revision in the deployment history keeps its Content as long as it is kept.
const revisionByContent = "fleetgo.io/revision-by-content"

func revisionContents(r *fleet.BundleRevision) []string {
	if r.Spec.Inputs == nil || r.Spec.Inputs.Content == "" {
		return nil
	}
	return []string{r.Spec.Inputs.Content}
}

// watchRevisions indexes BundleRevisions by the Content they keep and counts a Content again
// when one is recorded or dropped.
func watchRevisions(contents fleetcontrollers.ContentController, revisions fleetcontrollers.BundleRevisionController) {
	revisions.Cache().AddIndexer(revisionByContent, func(r *fleet.BundleRevision) ([]string, error) { return revisionContents(r), nil })
	watchKeepers(contents, revisions.Informer(), revisionContents)
}

// keptByRevisions is how many BundleRevisions keep Content name.
func (h *handler) keptByRevisions(name string) (int, error) {
	if h.revisions == nil {
		return 0, nil
	}
	rs, err := h.revisions.GetByIndex(revisionByContent, name)
	return len(rs), err
}
