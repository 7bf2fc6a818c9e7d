package leader

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/fleetgo/fleet/internal/serve"
)

// Two replicas on one host (the same host name: hostNetwork pods, or two processes on one
// machine) must not both lead.
func TestTwoReplicasOnOneHostDoNotBothLead(t *testing.T) {
	kube := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var leading atomic.Int32
	timing := Timing{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	for range 2 {
		go func() {
			_ = Run(ctx, Options{Elect: true, Namespace: "ns", Name: "lock", Kube: kube, Health: &serve.Status{}, Timing: timing,
				Start: func(context.Context) error { leading.Add(1); return nil }})
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for leading.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if leading.Load() == 0 {
		t.Fatal("neither replica leads")
	}
	// Several retry periods: a second replica that took itself for the holder would start at its
	// first try.
	time.Sleep(2 * time.Second)
	if n := leading.Load(); n != 1 {
		t.Fatalf("%d replicas lead, want 1", n)
	}
}

func TestIdentityIsUniquePerProcessRun(t *testing.T) {
	a, err := identity()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := identity()
	if a == b {
		t.Fatalf("two identities on one host are both %q", a)
	}
}

// A replica standing by warms up while another holds the Lease, and leads once the Lease is
// free without waiting for its warm-up to end.
func TestWarmRunsWhileStandingByAndStartDoesNotWaitForIt(t *testing.T) {
	other := "other"
	now := metav1.NewMicroTime(time.Now())
	kube := fake.NewSimpleClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	warming, started := make(chan struct{}), make(chan struct{})
	timing := Timing{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	go func() {
		_ = Run(ctx, Options{Elect: true, Namespace: "ns", Name: "lock", Kube: kube, Health: &serve.Status{}, Timing: timing,
			Warm:  func(ctx context.Context) { close(warming); <-ctx.Done() },
			Start: func(context.Context) error { close(started); return nil }})
	}()
	select {
	case <-warming:
	case <-time.After(30 * time.Second):
		t.Fatal("no warm-up while another replica leads")
	}
	select {
	case <-started:
		t.Fatal("started while another replica holds the Lease")
	case <-time.After(time.Second):
	}
	l, err := kube.CoordinationV1().Leases("ns").Get(ctx, "lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("")
	if _, err := kube.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("not leading once the Lease is given back (a warm-up that has not ended must not hold the start)")
	}
}
