package ui

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

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
	msg, err := s.act(kind, ns, name, op)
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
