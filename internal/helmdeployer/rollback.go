package helmdeployer

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
)

// Rollback re-applies the release's current revision, putting drifted resources back. Helm keeps
// at most maxHistory revisions (DefaultMaxHistory when 0). A failed rollback's revision stays in
// the history only with keepFailHistory (Fleet's correctDrift.keepFailHistory); otherwise it is
// removed and the revision rolled back to is the deployed one again, so failed corrections do
// not pile up.
func (d *Deployer) Rollback(ctx context.Context, r *Release, serviceAccount string, force, keepFailHistory bool, maxHistory int) (err error) {
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	defer d.memo.forget(r.Namespace + "/" + r.Name)
	sa, err := d.serviceAccount(ctx, serviceAccount)
	if err != nil {
		return err
	}
	ac, err := d.actionConfig(r.Namespace, sa)
	if err != nil {
		return err
	}
	// Helm then reads the history verified here, and records the revision it writes first.
	e, _, err := d.verified(ctx, ac, r.Namespace, r.Name)
	if err != nil {
		return fmt.Errorf("rolling back: %w", err)
	}
	defer func() {
		if lerr := d.writeLedger(ctx, ac, *e); lerr != nil {
			err = errors.Join(err, lerr)
		}
	}()
	rb := action.NewRollback(ac)
	rb.Version = r.Version
	rb.Force = force
	rb.MaxHistory = maxHistory
	if rb.MaxHistory <= 0 {
		rb.MaxHistory = DefaultMaxHistory
	}
	if err := rb.Run(r.Name); err != nil {
		err = fmt.Errorf("rolling back release %s: %w", r, err)
		if !keepFailHistory {
			if derr := dropFailedRollback(ac.Releases, r.Name, r.Version); derr != nil {
				return errors.Join(err, derr)
			}
		}
		return err
	}
	return nil
}

// dropFailedRollback removes the failed revision a rollback to version left as the newest of
// release name, and marks version deployed again.
func dropFailedRollback(store *storage.Storage, name string, version int) error {
	last, err := store.Last(name)
	if err != nil {
		return fmt.Errorf("reading release %s after a failed rollback: %w", name, err)
	}
	if last.Version <= version || last.Info == nil || last.Info.Status != release.StatusFailed {
		return nil
	}
	if _, err := store.Delete(name, last.Version); err != nil {
		return fmt.Errorf("removing failed rollback %s.v%d: %w", name, last.Version, err)
	}
	prev, err := store.Get(name, version)
	if err != nil {
		return fmt.Errorf("reading release %s.v%d: %w", name, version, err)
	}
	prev.Info.Status = release.StatusDeployed
	return store.Update(prev)
}
