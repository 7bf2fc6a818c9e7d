package downstream

import (
	"context"
	"testing"
	"time"
)

// An answer is used again while younger than reviewTTL, per service account and Secret, and
// asked again after: a right granted or taken away counts within reviewTTL.
func TestReviewsAreRememberedForTheirTTL(t *testing.T) {
	asked := 0
	answer := false
	r := &reviews{m: map[access]review{}, ask: func(context.Context, access) (bool, error) {
		asked++
		return answer, nil
	}}
	ctx, now := context.Background(), time.Now()
	if ok, _ := r.allowed(ctx, access{"team", "deployer", "secrets", "creds"}, now); ok || asked != 1 {
		t.Fatalf("first answer: %v after %d asks", ok, asked)
	}
	answer = true
	if ok, _ := r.allowed(ctx, access{"team", "deployer", "secrets", "creds"}, now.Add(reviewTTL/2)); ok || asked != 1 {
		t.Fatalf("within the TTL: %v after %d asks", ok, asked)
	}
	if ok, _ := r.allowed(ctx, access{"team", "other", "secrets", "creds"}, now.Add(reviewTTL/2)); !ok || asked != 2 {
		t.Fatalf("another service account is its own question: %v after %d asks", ok, asked)
	}
	if ok, _ := r.allowed(ctx, access{"team", "deployer", "configmaps", "creds"}, now.Add(reviewTTL/2)); !ok || asked != 3 {
		t.Fatalf("a ConfigMap of that name is its own question: %v after %d asks", ok, asked)
	}
	if ok, _ := r.allowed(ctx, access{"team", "deployer", "secrets", "creds"}, now.Add(reviewTTL)); !ok || asked != 4 {
		t.Fatalf("after the TTL: %v after %d asks", ok, asked)
	}
}
