package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/notify"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Delivery intervals.
const (
	// deliveryRetryFirst and deliveryRetryMax space the retries of a message whose endpoint
	// failed.
	deliveryRetryFirst = 2 * time.Second
	deliveryRetryMax   = 5 * time.Minute
	// deliveryWorkers send at once, whatever the number of Alerts.
	deliveryWorkers = 2
)

// job is a message to deliver: the newest event of one source of one Alert.
type job struct {
	alert  string // namespace/name
	source string
}

// deliveries are the messages waiting for their endpoint, per Alert and source in the order of
// their transitions (the source's events not sent yet, as the last look at it found them).
type deliveries struct {
	h     *handler
	queue workqueue.TypedRateLimitingInterface[job]
	mu    sync.Mutex
	next  map[job][]notify.Event
	// delivered is the key each job delivered last, recorded in the Alert's status: a look at
	// an Alert the cache shows from before that write queues nothing already delivered.
	delivered map[job]string
}

func newDeliveries(ctx context.Context, h *handler) *deliveries {
	d := &deliveries{h: h, next: map[job][]notify.Event{}, delivered: map[job]string{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[job](deliveryRetryFirst, deliveryRetryMax))}
	for range deliveryWorkers {
		go d.work(ctx)
	}
	go func() {
		<-ctx.Done()
		d.queue.ShutDown()
	}()
	return d
}

// add queues evs, the unsent events of source, for Alert a (none: nothing waits for it).
func (d *deliveries) add(a *fleet.Alert, source string, evs []notify.Event) {
	j := job{alert: a.Namespace + "/" + a.Name, source: source}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, e := range evs {
		if e.Key == d.delivered[j] {
			evs = evs[i+1:]
			break
		}
	}
	if len(evs) == 0 {
		delete(d.next, j)
		return
	}
	d.next[j] = evs
	d.queue.Add(j)
}

// forget drops what waits for the deleted Alert of key.
func (d *deliveries) forget(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dropAlert(d.next, key)
	dropAlert(d.delivered, key)
}

func (d *deliveries) work(ctx context.Context) {
	for {
		j, shutdown := d.queue.Get()
		if shutdown {
			return
		}
		d.one(ctx, j)
		d.queue.Done(j)
	}
}

// one delivers j's event and records it on the Alert; a failure is recorded too, and retried
// with backoff.
func (d *deliveries) one(ctx context.Context, j job) {
	d.mu.Lock()
	evs := d.next[j]
	d.mu.Unlock()
	if len(evs) == 0 {
		d.queue.Forget(j)
		return
	}
	e := evs[0]
	ns, name, _ := strings.Cut(j.alert, "/")
	a, err := d.h.Alerts.Cache().Get(ns, name)
	if err != nil || a.Spec.Suspend || sentAlready(a, e) {
		d.done(j, e)
		return
	}
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	err = d.h.send(sendCtx, a, e)
	cancel()
	if rerr := d.record(a, e, err); rerr != nil && err == nil {
		err = rerr // delivered, not recorded: sent again (the receiver sees the key again)
	}
	if err != nil {
		logrus.WithFields(logfields.For("alert", ns, name)).WithField("source", e.Source).Warnf("delivering: %v", err)
		d.queue.AddRateLimited(j)
		return
	}
	d.mu.Lock()
	d.delivered[j] = e.Key
	d.mu.Unlock()
	d.h.folds.delivered(j, e, time.Now())
	d.done(j, e)
}

// done: e of j is delivered (or no longer to be); the events after it go next.
func (d *deliveries) done(j job, e notify.Event) {
	d.mu.Lock()
	more := false
	if cur := d.next[j]; len(cur) > 0 && cur[0].Key == e.Key {
		d.next[j] = cur[1:]
		more = len(cur) > 1
		if !more {
			delete(d.next, j)
		}
	}
	d.mu.Unlock()
	d.queue.Forget(j)
	if more {
		d.queue.Add(j)
	}
}

func sentAlready(a *fleet.Alert, e notify.Event) bool {
	for _, s := range a.Status.Sent {
		if s.Source == e.Source && s.Key == e.Key {
			return true
		}
	}
	return false
}

// record writes the delivery's outcome into the Alert's status: the key sent for the source,
// when, and its summary; or the error.
func (d *deliveries) record(a *fleet.Alert, e notify.Event, sendErr error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := d.h.Alerts.Get(a.Namespace, a.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		st := &cur.Status
		if sendErr != nil {
			st.LastError = sendErr.Error()
			fleet.SetCondition(&st.Conditions, fleet.ConditionDelivered, corev1.ConditionFalse, "Failed", st.LastError, now.Time)
		} else {
			setSent(st, fleet.AlertSent{Source: e.Source, Key: e.Key, Reason: e.Reason, At: &now})
			st.LastSent, st.LastMessage, st.LastError = &now, e.Summary, ""
			fleet.SetCondition(&st.Conditions, fleet.ConditionDelivered, corev1.ConditionTrue, "", "", now.Time)
		}
		_, err = d.h.Alerts.UpdateStatus(cur)
		return err
	})
}

func setSent(st *fleet.AlertStatus, s fleet.AlertSent) {
	for i := range st.Sent {
		if st.Sent[i].Source == s.Source {
			st.Sent[i] = s
			return
		}
	}
	st.Sent = append(st.Sent, s)
}

// errRefused is an endpoint's refusal.
var errRefused = errors.New("refused")

func refused(code int, body string) error {
	return fmt.Errorf("%w: status %d %s", errRefused, code, body)
}
