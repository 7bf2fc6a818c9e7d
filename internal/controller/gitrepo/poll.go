package gitrepo

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/metrics"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// pollWhenDue asks the repository for the branch's commit when the polling interval is up, the
// spec changed or a webhook came, and schedules the next look. A webhook only says "look now":
// the commit that runs is always the one the remote's branch points at (ls-remote), never one a
// payload names.
func (h *handler) pollWhenDue(gr *fleet.GitRepo, src gitsource.Source, status *fleet.GitRepoStatus, now time.Time) {
	webhookNewer := !status.LastWebhookTime.IsZero() && !status.LastWebhookTime.Before(&status.LastPollingTime)
	if gr.Spec.DisablePolling {
		// Only the periodic look stops (as on Fleet): the first commit, a changed spec (a risen
		// forceSyncGeneration among its changes) and a webhook still make the controller look,
		// and a look that failed is tried again.
		failed := false
		if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c != nil && c.Status == corev1.ConditionFalse {
			failed = true
		}
		retryDue := failed && !now.Before(status.LastPollingTime.Add(failedRetry))
		if webhookNewer || status.LastPollingTime.IsZero() || gr.Generation != status.ObservedGeneration || retryDue {
			h.poll(gr, src, status, now)
		}
		if c := fleet.FindCondition(status.Conditions, fleet.ConditionGitPolling); c != nil && c.Status == corev1.ConditionFalse {
			h.GitRepos.EnqueueAfter(gr.Namespace, gr.Name, status.LastPollingTime.Add(failedRetry).Sub(now))
		}
	} else {
		interval := DefaultPollingInterval
		if gr.Spec.PollingInterval != nil && gr.Spec.PollingInterval.Duration > 0 {
			interval = gr.Spec.PollingInterval.Duration
		}
		due := status.LastPollingTime.Add(interval)
		if status.LastPollingTime.IsZero() || !now.Before(due) || gr.Generation != status.ObservedGeneration || webhookNewer {
			h.poll(gr, src, status, now)
			due = now.Add(interval)
		}
		// Jitter of a tenth keeps many repositories from polling in step.
		wait := due.Sub(now) + time.Duration(rand.Int64N(int64(interval/10)+1))
		h.GitRepos.EnqueueAfter(gr.Namespace, gr.Name, wait)
	}
	if webhookNewer && status.WebhookCommit != "" && status.PollingCommit != "" && status.WebhookCommit != status.PollingCommit {
		h.log(gr).WithFields(logrus.Fields{"webhookCommit": status.WebhookCommit, "commit": status.PollingCommit}).
			Warn("a webhook named a commit the branch does not point at; the branch's commit is used")
	}
}

func (h *handler) poll(gr *fleet.GitRepo, src gitsource.Source, status *fleet.GitRepoStatus, now time.Time) {
	ctx, cancel := context.WithTimeout(h.context(), h.Config.Get().GitClientTimeout.Duration)
	defer cancel()
	started := time.Now()
	commit, err := gitsource.LatestCommit(ctx, src)
	metrics.FetchedLatestCommit(gr.Namespace, gr.Name, time.Since(started), err)
	status.LastPollingTime = metav1.NewTime(now)
	if err != nil {
		fleet.SetCondition(&status.Conditions, fleet.ConditionGitPolling, corev1.ConditionFalse, "Error", err.Error(), now)
		return
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionGitPolling, corev1.ConditionTrue, "", "", now)
	status.PollingCommit = commit
}
