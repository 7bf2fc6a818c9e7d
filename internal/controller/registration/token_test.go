package registration

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestTokenLifetime(t *testing.T) {
	created := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tok := func(ttl time.Duration) *fleet.ClusterRegistrationToken {
		c := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		if ttl > 0 {
			c.Spec.TTL = &metav1.Duration{Duration: ttl}
		}
		return c
	}
	for _, tc := range []struct {
		name         string
		ttl, elapsed time.Duration
		wantExpires  bool
		wantLifetime time.Duration
		wantExpired  bool
	}{
		{"no TTL never expires", 0, 48 * time.Hour, false, neverExpires, false},
		{"an hour left", 2 * time.Hour, time.Hour, true, time.Hour, false},
		{"less left than the shortest token", time.Hour, 55 * time.Minute, true, minTokenLifetime, false},
		{"at expiry", time.Hour, time.Hour, true, minTokenLifetime, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := created.Add(tc.elapsed)
			tk := &tokens{now: func() time.Time { return now }}
			expires, lifetime, expired := tk.lifetime(tok(tc.ttl))
			if (expires != nil) != tc.wantExpires || lifetime != tc.wantLifetime || expired != tc.wantExpired {
				t.Fatalf("lifetime = %v, %s, %v; want expires %v, %s, %v", expires, lifetime, expired, tc.wantExpires, tc.wantLifetime, tc.wantExpired)
			}
			if expires != nil && !expires.Time.Equal(created.Add(tc.ttl)) {
				t.Fatalf("expires at %s, want %s", expires.Time, created.Add(tc.ttl))
			}
		})
	}
}
