package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/fleetgo/fleet/internal/historyapi"
	progression "github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// action takes one write as the viewer: pause, resume or redeploy a GitRepo, HelmOp or Bundle;
// approve or abort a Bundle's rollout. The answer is one line: what was done, or the apiserver's
// refusal as it said it.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	kind, ns, name, op := r.PostForm.Get("kind"), r.PostForm.Get("namespace"), r.PostForm.Get("name"), r.PostForm.Get("op")
	var msg string
	var err error
	if kind == "BundleHistory" {
		msg, err = s.actHistory(ns, name, op, r.PostForm)
	} else {
		msg, err = s.act(kind, ns, name, op)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("%s %s/%s: %s refused: %v", kind, ns, name, op, err), http.StatusForbidden)
		return
	}
	fmt.Fprintf(w, "%s %s/%s: %s", kind, ns, name, msg)
}

func (s *Server) act(kind, ns, name, op string) (string, error) {
	if s.api == nil {
		return "", fmt.Errorf("this UI shows fixed objects: nothing can be changed")
	}
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		switch kind {
		case "GitRepo":
			msg, err = actOnSpec(s.api.GitRepo(), ns, name, op, func(o *fleet.GitRepo) (*bool, *int64) {
				return &o.Spec.Paused, &o.Spec.ForceSyncGeneration
			})
		case "HelmOp":
			msg, err = actOnSpec(s.api.HelmOp(), ns, name, op, func(o *fleet.HelmOp) (*bool, *int64) {
				return &o.Spec.Paused, &o.Spec.ForceSyncGeneration
			})
		case "Bundle":
			msg, err = actOnSpec(s.api.Bundle(), ns, name, op, func(o *fleet.Bundle) (*bool, *int64) {
				return &o.Spec.Paused, &o.Spec.ForceSyncGeneration
			})
		case "Rollout":
			msg, err = s.actRollout(ns, name, op)
		default:
			err = fmt.Errorf("no such kind")
		}
		return err
	})
	return msg, err
}

// getUpdater reads and writes one kind (the generated clients of GitRepos, HelmOps, Bundles).
type getUpdater[T any] interface {
	Get(namespace, name string, opts metav1.GetOptions) (T, error)
	Update(T) (T, error)
}

// actOnSpec applies pause, resume or redeploy to the object ns/name of c, whose spec fields
// fields names.
func actOnSpec[T any](c getUpdater[T], ns, name, op string, fields func(T) (*bool, *int64)) (string, error) {
	obj, err := c.Get(ns, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	paused, syncGeneration := fields(obj)
	msg, err := onSpec(op, paused, syncGeneration)
	if err == nil {
		_, err = c.Update(obj)
	}
	return msg, err
}

// onSpec applies pause, resume or redeploy to a spec's fields.
func onSpec(op string, paused *bool, syncGeneration *int64) (string, error) {
	switch op {
	case "pause":
		*paused = true
		return "paused", nil
	case "resume":
		*paused = false
		return "resumed", nil
	case "redeploy":
		*syncGeneration++
		return fmt.Sprintf("redeploying (forceSyncGeneration %d)", *syncGeneration), nil
	}
	return "", fmt.Errorf("no such action")
}

// actHistory rolls a Bundle's clusters back (op rollback: form fields to and clusters, as
// `fleet rollback --to --clusters` takes them) or releases them (op release), as the viewer:
// one write, of the Bundle's BundleHistory.
func (s *Server) actHistory(ns, name, op string, form url.Values) (string, error) {
	if s.api == nil {
		return "", fmt.Errorf("this UI shows fixed objects: nothing can be changed")
	}
	rb := historyapi.Rollback{To: strings.TrimSpace(form.Get("to")), Reason: form.Get("reason"), Now: form.Get("now") != "", At: time.Now()}
	switch op {
	case "rollback":
		if rb.To == "" {
			return "", fmt.Errorf("say which revision, commit or time to roll back to")
		}
	case "release":
		rb.Release, rb.To = true, ""
	default:
		return "", fmt.Errorf("no such action")
	}
	if sel := strings.TrimSpace(form.Get("clusters")); sel != "" {
		parsed, err := labels.Parse(sel)
		if err != nil {
			return "", fmt.Errorf("clusters %q: %w", sel, err)
		}
		rb.Clusters = parsed
	}
	done, err := rb.Run(s.api, ns, name)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, d := range done {
		for _, h := range d.Holds {
			parts = append(parts, fmt.Sprintf("%d clusters held at revision %s", len(h.Clusters), h.Revision))
		}
		if len(d.Released) > 0 {
			parts = append(parts, fmt.Sprintf("%d clusters released", len(d.Released)))
		}
	}
	return strings.Join(parts, "; "), nil
}

func (s *Server) actRollout(ns, name, op string) (string, error) {
	ro, err := s.api.Rollout().Get(ns, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	var act func(*fleet.Rollout) (string, error)
	switch op {
	case "approve":
		act = progression.Approve("")
	case "abort":
		act = progression.Abort
	case "retry":
		act = progression.Retry
	default:
		return "", fmt.Errorf("no such action")
	}
	msg, err := act(ro)
	if err != nil {
		return "", err
	}
	_, err = s.api.Rollout().Update(ro)
	return msg, err
}
