// Package notify is `fleet notify`: a test message through an Alert's provider, sent by the
// manager (the client needs no credential of the provider), and what the Alert last delivered.
package notify

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetgo/fleet/internal/cli/termtext"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Test asks the manager for a test message through Alert ns/name's provider and waits, polling
// every poll until timeout, for the Alert to record it delivered, or for its delivery to fail.
func Test(ctx context.Context, alerts fleetcontrollers.AlertClient, ns, name string, timeout, poll time.Duration, out io.Writer) error {
	asked := time.Now().UTC()
	nonce := asked.Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, fleet.NotifyTestAnnotation, nonce)
	if _, err := alerts.Patch(ns, name, types.MergePatchType, []byte(patch)); err != nil {
		return fmt.Errorf("alert %s/%s: %w", ns, name, err)
	}
	source, key := "Alert/"+name+"#test", "test/"+nonce
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		a, err := alerts.Get(ns, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range a.Status.Sent {
			if s.Source == source && s.Key == key {
				fmt.Fprintf(out, "alert %s/%s: test message delivered through %s\n", ns, name, termtext.Printable(a.Spec.ProviderRef))
				return nil
			}
		}
		c := fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered)
		if c != nil && c.Status == "False" && !failedBefore(c.LastUpdateTime, asked) {
			return fmt.Errorf("alert %s/%s: the test message was not delivered: %s", ns, name, termtext.Printable(a.Status.LastError))
		}
		select {
		case <-ctx.Done():
			last := ""
			if a.Status.LastError != "" {
				last = "; its last error: " + termtext.Printable(a.Status.LastError)
			}
			return fmt.Errorf("alert %s/%s: no delivery of the test message within %s (is the manager running?)%s", ns, name, timeout, last)
		case <-time.After(poll):
		}
	}
}

// failedBefore says whether a failure recorded at updated (RFC 3339) is older than the request.
func failedBefore(updated string, asked time.Time) bool {
	t, err := time.Parse(time.RFC3339, updated)
	return err != nil || t.Before(asked.Truncate(time.Second))
}
