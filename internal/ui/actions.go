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
			msg, err = s.actGitRepo(ns, name, op)
		case "HelmOp":
			msg, err = s.actHelmOp(ns, name, op)
		case "Bundle":
			msg, err = s.actBundle(ns, name, op)
		case "Rollout":
			msg, err = s.actRollout(ns, name, op)
		default:
			err = fmt.Errorf("no such kind")
		}
		return err
	})
	return msg, err
}

func (s *Server) actGitRepo(ns, name, op string) (string, error) {
	gr, err := s.api.GitRepo().Get(ns, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	msg, err := onSpec(op, &gr.Spec.Paused, &gr.Spec.ForceSyncGeneration)
	if err == nil {
		_, err = s.api.GitRepo().Update(gr)
	}
	return msg, err
}

func (s *Server) actHelmOp(ns, name, op string) (string, error) {
	o, err := s.api.HelmOp().Get(ns, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	msg, err := onSpec(op, &o.Spec.Paused, &o.Spec.ForceSyncGeneration)
	if err == nil {
		_, err = s.api.HelmOp().Update(o)
	}
	return msg, err
}

func (s *Server) actBundle(ns, name, op string) (string, error) {
	b, err := s.api.Bundle().Get(ns, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	msg, err := onSpec(op, &b.Spec.Paused, &b.Spec.ForceSyncGeneration)
	if err == nil {
		_, err = s.api.Bundle().Update(b)
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
