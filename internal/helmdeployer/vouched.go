package helmdeployer

import (
	"context"
	"fmt"
	"sync"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// vouched is the release storage Helm acts through once the agent knows the release's history
// (verified, or a release it is about to install): Helm reads of the release only the revisions
// the ledger vouches for, so one someone writes between the agent's check and Helm's own read
// (a newer revision, or the recorded one rewritten) is never what Helm starts from: its hooks
// never run and its manifest never decides what an upgrade or uninstall deletes. Vouched are the
// recorded revision with its digest, the older ones, and those Helm writes through it; before
// Helm writes a revision, its digest goes into the ledger as the pending one, so that a revision
// an interrupted action left is still known to be the agent's after a restart.
type vouched struct {
	driver.Driver
	d   *Deployer
	ctx context.Context
	// e is the release's entry as the action found it; last its recorded revision (nil: none).
	e    entry
	last *release.Release
	mu   sync.Mutex
	// written are the revisions Helm wrote through this storage.
	written map[int]bool
}

// vouch makes Helm act on the release of e only through revisions the ledger vouches for;
// last is its recorded revision, verified (nil when there is none).
func (d *Deployer) vouch(ctx context.Context, store driver.Driver, e entry, last *release.Release) *vouched {
	return &vouched{Driver: store, d: d, ctx: ctx, e: e, last: last, written: map[int]bool{}}
}

// ok says whether Helm may see r.
func (v *vouched) ok(r *release.Release) bool {
	if r == nil || r.Name != v.e.Name {
		return true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.written[r.Version]:
		return true
	case v.last == nil:
		return false
	case r.Version < v.last.Version:
		return true
	case r.Version == v.last.Version:
		return digest(r) == digest(v.last)
	}
	return false
}

func (v *vouched) filter(rs []*release.Release) []*release.Release {
	out := rs[:0]
	for _, r := range rs {
		if v.ok(r) {
			out = append(out, r)
			continue
		}
		logrus.WithFields(logrus.Fields{"namespace": r.Namespace, "release": r.Name, "revision": r.Version}).
			Warn("a release revision this agent did not write or verify is left out of what Helm reads")
	}
	return out
}

func (v *vouched) Get(key string) (*release.Release, error) {
	r, err := v.Driver.Get(key)
	if err != nil || v.ok(r) {
		return r, err
	}
	return nil, driver.ErrReleaseNotFound
}

func (v *vouched) List(filter func(*release.Release) bool) ([]*release.Release, error) {
	rs, err := v.Driver.List(filter)
	if err != nil {
		return rs, err
	}
	return v.filter(rs), nil
}

func (v *vouched) Query(labels map[string]string) ([]*release.Release, error) {
	rs, err := v.Driver.Query(labels)
	if err != nil {
		return rs, err
	}
	if rs = v.filter(rs); len(rs) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return rs, nil
}

// Create records the revision's digest as the pending one before Helm writes it.
func (v *vouched) Create(key string, r *release.Release) error {
	if r.Name == v.e.Name {
		if err := v.d.record(v.ctx, v.e, v.last, r); err != nil {
			return fmt.Errorf("recording revision %d of release %s/%s before writing it: %w", r.Version, r.Namespace, r.Name, err)
		}
		v.mu.Lock()
		v.written[r.Version] = true
		v.mu.Unlock()
	}
	return v.Driver.Create(key, r)
}
