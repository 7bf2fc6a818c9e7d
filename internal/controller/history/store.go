package history

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/controller/bundle"
	"github.com/fleetgo/fleet/internal/history"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// stored is a Bundle's record and the objects it was read from.
type stored struct {
	rec     *history.Record
	table   *fleet.BundleHistory
	objects map[string]*fleet.BundleRevision // by revision
	order   int64                            // the highest Order
	// labels name the Bundle's GitRepo or HelmOp, as its deployments do.
	labels map[string]string
	// contents are the Contents the deployments of each revision name.
	contents map[string]string
	// captured are the inputs of revisions read when deployments moved to them (recorder.capture).
	captured map[string]*fleet.RolloutRevision
}

func (s *stored) contentOf(revision, content string) {
	if s.contents == nil {
		s.contents = map[string]string{}
	}
	if content != "" {
		s.contents[revision] = content
	}
}

// from takes the GitRepo's or HelmOp's label of a deployment of the Bundle.
func (s *stored) from(bdLabels map[string]string) {
	for _, k := range []string{fleet.RepoLabel, fleet.HelmNameLabel} {
		if v := bdLabels[k]; v != "" {
			if s.labels == nil {
				s.labels = map[string]string{}
			}
			s.labels[k] = v
		}
	}
}

func (s *stored) empty() bool { return s.table == nil && len(s.objects) == 0 }

// load reads a Bundle's record from the caches.
func (r *recorder) load(ns, name string) (*stored, error) {
	s := &stored{objects: map[string]*fleet.BundleRevision{}}
	table, err := r.histories.Get(ns, name)
	switch {
	case err == nil:
		s.table = table
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	revs, err := r.revisions.GetByIndex(byBundle, ns+"/"+name)
	if err != nil {
		return nil, err
	}
	for _, o := range revs {
		s.objects[o.Spec.Revision] = o
		s.order = max(s.order, o.Spec.Order)
	}
	s.rec = history.FromObjects(s.table, revs)
	return s, nil
}

// save writes what changed of the record: the cluster table first (the spans index into it),
// then each revision's spans; the revisions dropped are deleted.
func (r *recorder) save(ns, name string, s *stored, dropped []string) error {
	if err := r.saveTable(ns, name, s); err != nil {
		return err
	}
	for _, rev := range s.rec.Revisions {
		if err := r.saveRevision(ns, name, s, rev); err != nil {
			return err
		}
	}
	for _, rev := range dropped {
		if o := s.objects[rev]; o != nil {
			err := r.Revisions.Delete(o.Namespace, o.Name, &metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func (r *recorder) saveTable(ns, name string, s *stored) error {
	if s.table != nil && len(s.table.Status.Clusters) == len(s.rec.Clusters) {
		return nil
	}
	t := s.table
	if t == nil {
		created, err := r.Histories.Create(&fleet.BundleHistory{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: s.labels}})
		if err != nil {
			return fmt.Errorf("creating bundlehistory %s/%s: %w", ns, name, err)
		}
		t = created
	}
	t = t.DeepCopy()
	t.Status.Clusters = s.rec.Clusters
	_, err := r.Histories.UpdateStatus(t)
	return err
}

func (r *recorder) saveRevision(ns, name string, s *stored, rev history.Revision) error {
	o := s.objects[rev.Revision]
	if o == nil {
		// The revision's Helm values go into its own Secret, not into the record, which
		// whoever reads bundlerevisions in the namespace reads.
		in := s.inputsOf(r, ns, name, rev.Revision).DeepCopy()
		var values map[string][]byte
		if r.SecretWriter != nil {
			var err error
			if values, err = bundlevalues.TakeFromRevision(in); err != nil {
				return fmt.Errorf("bundle %s/%s: %w", ns, name, err)
			}
		}
		s.order++
		created, err := r.Revisions.Create(&fleet.BundleRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.SafeConcatName(name, rev.Revision),
				Labels: map[string]string{fleet.HistoryBundleLabel: names.Limit(name, 63, name)}},
			Spec: fleet.BundleRevisionSpec{Bundle: name, Revision: rev.Revision, Commit: rev.Commit, Order: s.order, Inputs: in}})
		if err != nil {
			return fmt.Errorf("creating bundlerevision for %s/%s revision %s: %w", ns, name, rev.Revision, err)
		}
		o = created
		if err := r.writeValues(o, values); err != nil {
			return err
		}
	} else if err := r.mendValues(ns, name, s, o); err != nil {
		return err
	} else if o, err = r.moveValues(o); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(o.Status.Spans, rev.Spans) {
		return nil
	}
	o = o.DeepCopy()
	o.Status.Spans = rev.Spans
	_, err := r.Revisions.UpdateStatus(o)
	return err
}

// writeValues writes the Helm values of o's inputs (taken out of them) into o's values Secret.
func (r *recorder) writeValues(o *fleet.BundleRevision, values map[string][]byte) error {
	if values == nil || o.Spec.Inputs == nil {
		return nil
	}
	owner := bundlevalues.RevisionOwner("BundleRevision", o.Name, o.UID)
	return bundle.WriteRevisionValues(r.SecretWriter, bundlevalues.RevisionSecret(o.Namespace, owner,
		bundlevalues.RevisionData(map[string]map[string][]byte{o.Spec.Inputs.ValuesHash: values})))
}

// moveValues takes the Helm values a record written before revision-values Secrets holds in
// its inputs into its Secret: o as written then (o itself when it holds none).
func (r *recorder) moveValues(o *fleet.BundleRevision) (*fleet.BundleRevision, error) {
	if r.SecretWriter == nil || !inlineValues(o.Spec.Inputs) {
		return o, nil
	}
	next := o.DeepCopy()
	values, err := bundlevalues.TakeFromRevision(next.Spec.Inputs)
	if err != nil || values == nil {
		return o, err
	}
	if err := r.writeValues(next, values); err != nil {
		return o, err
	}
	return r.Revisions.Update(next)
}

// inlineValues says in holds Helm values itself (of its options or of a named target).
func inlineValues(in *fleet.RolloutRevision) bool {
	if in == nil {
		return false
	}
	if in.Options.Helm != nil && in.Options.Helm.Values != nil {
		return true
	}
	for _, t := range in.Targets {
		if t.Name != "" && t.Helm != nil && t.Helm.Values != nil {
			return true
		}
	}
	return false
}

// mendValues writes o's values Secret again when it is missing (its write after o's failed, or
// it was deleted) and the inputs of o's revision are still known with the same values.
func (r *recorder) mendValues(ns, name string, s *stored, o *fleet.BundleRevision) error {
	if o.Spec.Inputs == nil || o.Spec.Inputs.ValuesHash == "" || r.Secrets == nil || r.SecretWriter == nil {
		return nil
	}
	if _, err := r.Secrets.Get(ns, bundlevalues.RevisionSecretName(o.Name)); !apierrors.IsNotFound(err) {
		return nil
	}
	in := s.inputsOf(r, ns, name, o.Spec.Revision).DeepCopy()
	values, err := bundlevalues.TakeFromRevision(in)
	if err != nil || values == nil || in.ValuesHash != o.Spec.Inputs.ValuesHash {
		return err
	}
	return r.writeValues(o, values)
}

// inputs are what revision deploys, sealed, when the Bundle (ns/name) still deploys it from
// content: nil when it has moved on (or is gone).
func (r *recorder) inputs(ns, name, revision, content string) *fleet.RolloutRevision {
	if r.Bundles == nil || content == "" {
		return nil
	}
	cached, err := r.Bundles.Get(ns, name)
	if err != nil {
		return nil
	}
	// The Helm values kept in the Bundle's values Secret are part of what it deploys, as the
	// bundle controller reads it.
	b := cached.DeepCopy()
	if err := bundle.StoredValues(r.Secrets, b); err != nil {
		return nil
	}
	in := rollout.Inputs(b, content)
	if in.Revision != revision {
		return nil
	}
	in.Seal = bundle.Seal(r.SealKey, b, in)
	return in
}

// inputsOf are what revision deploys: as captured when a deployment moved to it, else as the
// Bundle (ns/name) has it now (nil when it has moved on).
func (s *stored) inputsOf(r *recorder, ns, name, revision string) *fleet.RolloutRevision {
	if in := s.captured[revision]; in != nil {
		return in
	}
	return r.inputs(ns, name, revision, s.contents[revision])
}
