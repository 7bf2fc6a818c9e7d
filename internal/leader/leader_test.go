package leader

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

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
