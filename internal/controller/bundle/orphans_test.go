package bundle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// goneBundles answers every Get with NotFound: the orphans' Bundle is deleted.
type goneBundles struct {
	fleetcontrollers.BundleController
}

func (goneBundles) Get(_, name string, _ metav1.GetOptions) (*fleet.Bundle, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "bundles"}, name)
}

// flakyDeletes fails the first `fails` deletes, then deletes.
type flakyDeletes struct {
	fleetcontrollers.BundleDeploymentController
	mu              sync.Mutex
	fails, attempts int
	deleted         bool
}

func (f *flakyDeletes) Delete(_, _ string, _ *metav1.DeleteOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts++
	if f.attempts <= f.fails {
		return errors.New("etcdserver: request timed out")
	}
	f.deleted = true
	return nil
}

func (f *flakyDeletes) state() (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts, f.deleted
}

// An orphan whose delete fails goes back to the queue with its backoff until it is deleted,
// and at most orphanTries attempts are made at one that keeps failing.
func TestOrphansAreRetriedThenGivenUp(t *testing.T) {
	for _, tc := range []struct {
		fails        int
		wantAttempts int
		wantDeleted  bool
	}{{fails: 3, wantAttempts: 4, wantDeleted: true}, {fails: 100, wantAttempts: orphanTries}} {
		bds := &flakyDeletes{fails: tc.fails}
		h := &handler{bundles: goneBundles{}, bds: bds, orphans: newOrphanQueue(time.Millisecond)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.deleteOrphans(ctx); close(done) }()
		h.orphans.Add(orphan{namespace: "cluster-ns", name: "app", bundleNamespace: "fleet-default", bundle: "app"})
		deadline := time.Now().Add(30 * time.Second)
		for {
			attempts, deleted := bds.state()
			if (deleted || attempts >= tc.wantAttempts) && h.orphans.Len() == 0 && h.orphans.NumRequeues(orphan{namespace: "cluster-ns", name: "app", bundleNamespace: "fleet-default", bundle: "app"}) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fails %d: %d attempts, deleted %v", tc.fails, attempts, deleted)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
		if attempts, deleted := bds.state(); attempts != tc.wantAttempts || deleted != tc.wantDeleted {
			t.Fatalf("fails %d: %d attempts (want %d), deleted %v", tc.fails, attempts, tc.wantAttempts, deleted)
		}
	}
}
