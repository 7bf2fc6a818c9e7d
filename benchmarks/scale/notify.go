package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/notify"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Notifications is what an Alert on the experiment's Bundle sent through a webhook: the messages
// (their reasons, in order of arrival), and how long each took from the Rollout's status showing
// its transition to its arrival.
type Notifications struct {
	Messages int      `json:"messages"`
	Reasons  []string `json:"reasons"`
	// Failures are the messages that name failures (a halt, a rollback): their summary line
	// and the failures grouped by cause, as received.
	Failures   []NotifiedFailure `json:"failures"`
	P95Seconds float64           `json:"p95Seconds"`
	MaxSeconds float64           `json:"maxSeconds"`
	// LimitSeconds is the goal for the p95.
	LimitSeconds float64 `json:"limitSeconds"`
}

// NotifiedFailure is one message naming failures.
type NotifiedFailure struct {
	Reason  string         `json:"reason"`
	Summary string         `json:"summary"`
	Groups  []notify.Group `json:"groups"`
}

// notifyLimit is the goal: a message within 10 s of its transition (p95).
const notifyLimit = 10 * time.Second

// notifyProbe receives the Alert's messages and watches the Rollout: for each message key, when
// the Rollout first showed that transition and when the message came.
type notifyProbe struct {
	mu      sync.Mutex
	shown   map[string]time.Time
	arrived map[string]time.Time
	reasons []string
	failed  []NotifiedFailure
	srv     *http.Server
	rolls   *watcher[*fleet.Rollout]
}

// startNotifyProbe serves the webhook, watches the Rollouts and writes an AlertProvider and an
// Alert on the Bundle (before its first revision, which it therefore reports too).
func startNotifyProbe(ctx context.Context, e *env, bundle string) (*notifyProbe, error) {
	p := &notifyProbe{shown: map[string]time.Time{}, arrived: map[string]time.Time{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg NotifiedFailure
		_ = json.Unmarshal(body, &msg)
		p.mu.Lock()
		if _, dup := p.arrived[r.Header.Get("X-Fleet-Message-Key")]; !dup {
			p.arrived[r.Header.Get("X-Fleet-Message-Key")] = time.Now()
			p.reasons = append(p.reasons, msg.Reason)
			if len(msg.Groups) > 0 {
				p.failed = append(p.failed, msg)
			}
		}
		p.mu.Unlock()
	})}
	go func() { _ = p.srv.Serve(l) }()
	p.rolls = newWatcher(ctx, &fleet.Rollout{}, fleet.DefaultNamespace, e.api.Rollout().List, e.api.Rollout().Watch)
	seen := func(obj any) {
		if r, ok := obj.(*fleet.Rollout); ok && r.Name == bundle {
			if ev, ok := notify.OfRollout(r.Name, &r.Status); ok {
				p.mu.Lock()
				if _, was := p.shown[ev.Key]; !was {
					p.shown[ev.Key] = time.Now()
				}
				p.mu.Unlock()
			}
		}
	}
	_, _ = p.rolls.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	meta := metav1.ObjectMeta{Name: "bench", Namespace: fleet.DefaultNamespace}
	if _, err := e.api.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: meta,
		Spec: fleet.AlertProviderSpec{Type: fleet.ProviderWebhook, Address: "http://" + l.Addr().String() + "/"}}); err != nil {
		return nil, err
	}
	_, err = e.api.Alert().Create(&fleet.Alert{ObjectMeta: meta,
		Spec: fleet.AlertSpec{ProviderRef: "bench", Sources: []fleet.AlertSource{{Kind: "Bundle", Name: bundle}}}})
	if err != nil {
		return nil, err
	}
	return p, waitFor(time.Minute, func() (bool, error) {
		a, err := e.api.Alert().Get(fleet.DefaultNamespace, "bench", metav1.GetOptions{})
		return err == nil && fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered) != nil, nil
	})
}

// stop ends the probe and sums it up.
func (p *notifyProbe) stop() Notifications {
	_ = p.srv.Close()
	p.rolls.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Notifications{Messages: len(p.reasons), Reasons: p.reasons, Failures: p.failed, LimitSeconds: notifyLimit.Seconds()}
	var took []float64
	for key, at := range p.arrived {
		if shown, ok := p.shown[key]; ok {
			took = append(took, at.Sub(shown).Seconds())
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		out.P95Seconds = took[min(len(took)-1, (len(took)*95+99)/100-1)]
		out.MaxSeconds = took[len(took)-1]
	}
	return out
}
