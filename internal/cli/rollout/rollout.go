// Package rollout is `fleet rollout`: where a progressive rollout stands, and the users'
// decisions about it (approve a stage, pause, resume, abort, retry), written to the spec of the
// Rollout the manager keeps per Bundle. A NAME is a Rollout (its Bundle's name), or a GitRepo or
// HelmOp whose Bundles have Rollouts.
package rollout

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"

	"github.com/fleetgo/fleet/internal/cli/termtext"
	progression "github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Find returns the Rollouts NAME stands for in the namespace: the Rollout of that name, else
// those of the GitRepo or HelmOp of that name.
func Find(c fleetcontrollers.RolloutClient, namespace, name string) ([]fleet.Rollout, error) {
	r, err := c.Get(namespace, name, metav1.GetOptions{})
	if err == nil {
		return []fleet.Rollout{*r}, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	for _, key := range []string{fleet.RepoLabel, fleet.HelmNameLabel} {
		list, err := c.List(namespace, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{key: name}).String()})
		if err != nil {
			return nil, err
		}
		if len(list.Items) > 0 {
			slices.SortFunc(list.Items, func(a, b fleet.Rollout) int { return strings.Compare(a.Name, b.Name) })
			return list.Items, nil
		}
	}
	return nil, fmt.Errorf("no rollout %s in namespace %s, nor a GitRepo or HelmOp of that name with rollouts (does it name a RolloutPolicy with the %s annotation?)",
		name, namespace, fleet.RolloutPolicyAnnotation)
}

// Print writes where each rollout stands.
func Print(out io.Writer, rollouts []fleet.Rollout) {
	out = termtext.Writer(out) // messages and reasons are what agents and tenants wrote
	for i, r := range rollouts {
		if i > 0 {
			fmt.Fprintln(out)
		}
		st := r.Status
		fmt.Fprintf(out, "Rollout %s/%s  policy %s  revision %s  %s", r.Namespace, r.Name, st.Policy, st.Revision, st.Phase)
		if st.Stage != "" {
			fmt.Fprintf(out, "  stage %s", st.Stage)
		}
		if r.Spec.Paused {
			fmt.Fprint(out, "  (paused)")
		}
		fmt.Fprintln(out)
		if st.Message != "" {
			fmt.Fprintf(out, "  %s\n", st.Message)
		}
		PrintStages(out, "  ", st)
		for _, f := range st.Failures {
			fmt.Fprintf(out, "  failed: cluster %s, gate %s: %s\n", f.Cluster, f.Gate, f.Reason)
		}
	}
}

// PrintStages writes the stage table of a rollout, each line indented.
func PrintStages(out io.Writer, indent string, st fleet.RolloutStatus) {
	out = termtext.Writer(out)
	if len(st.Stages) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%sSTAGE\tCLUSTERS\tUPDATED\tPASSING\tFAILED\tSTATE\n", indent)
	for _, s := range st.Stages {
		state := s.State
		if s.Message != "" {
			state += " (" + s.Message + ")"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%d\t%d\t%d\t%s\n", indent, s.Name, s.Clusters, s.Updated, s.Passing, s.Failed, state)
	}
	_ = tw.Flush()
}

// PrintJSON writes the rollouts as JSON.
func PrintJSON(out io.Writer, rollouts []fleet.Rollout) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"rollouts": rollouts})
}

// Action is a decision about a rollout (package internal/rollout has them all).
type Action = progression.Action

// The decisions `fleet rollout` takes.
var (
	Approve = progression.Approve
	Pause   = progression.Pause
	Abort   = progression.Abort
	Retry   = progression.Retry
)

// Apply runs act on each rollout, writing the spec (again on a conflict), and reports each.
func Apply(out io.Writer, c fleetcontrollers.RolloutClient, rollouts []fleet.Rollout, act Action) error {
	for _, r := range rollouts {
		var msg string
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := c.Get(r.Namespace, r.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if msg, err = act(cur); err != nil {
				return err
			}
			_, err = c.Update(cur)
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "rollout %s/%s: %s\n", r.Namespace, r.Name, msg)
	}
	return nil
}
