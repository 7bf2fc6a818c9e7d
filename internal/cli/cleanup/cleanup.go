// Package cleanup is `fleet cleanup`: it removes what the manager no longer needs and Fleet's
// support runbooks clear by hand, registrations superseded or orphaned, and GitRepo Jobs that
// finished. (CLI)
package cleanup

import (
	"context"
	"fmt"
	"io"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Options of a cleanup.
type Options struct {
	// DryRun says what would be deleted and deletes nothing.
	DryRun bool
}

// ClusterRegistrations deletes the ClusterRegistrations that are done with: of each agent
// (namespace and clientID), every granted one but the newest, and granted ones whose Cluster is
// gone. A registration not granted yet is left to the manager. It returns how many it deleted
// (or would).
func ClusterRegistrations(ctx context.Context, api fleetcontrollers.Interface, o Options, out io.Writer) (int, error) {
	regs, err := api.ClusterRegistration().List(metav1.NamespaceAll, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("listing clusterregistrations: %w", err)
	}
	byAgent := map[string][]*fleet.ClusterRegistration{}
	for i := range regs.Items {
		r := &regs.Items[i]
		if r.Status.Granted {
			key := r.Namespace + "/" + r.Spec.ClientID
			byAgent[key] = append(byAgent[key], r)
		}
	}
	deleted := 0
	for _, rs := range byAgent {
		sort.Slice(rs, func(i, j int) bool { return rs[j].CreationTimestamp.Before(&rs[i].CreationTimestamp) })
		for i, r := range rs {
			why := ""
			switch {
			case i > 0:
				why = "a newer registration of the same agent was granted"
			case r.Status.ClusterName != "":
				if _, err := api.Cluster().Get(r.Namespace, r.Status.ClusterName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					why = "its cluster " + r.Status.ClusterName + " is gone"
				} else if err != nil {
					return deleted, err
				}
			}
			if why == "" {
				continue
			}
			if err := remove(out, o, "clusterregistration", r.Namespace, r.Name, why, func() error {
				return api.ClusterRegistration().Delete(r.Namespace, r.Name, &metav1.DeleteOptions{})
			}); err != nil {
				return deleted, err
			}
			deleted++
		}
	}
	return deleted, nil
}

// GitJobs deletes the GitRepo Jobs that succeeded, with their pods: the GitRepo's status keeps
// what they did. Running and failed Jobs stay (a failed one's pod holds its logs).
func GitJobs(ctx context.Context, kube kubernetes.Interface, o Options, out io.Writer) (int, error) {
	jobs, err := kube.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: fleet.RepoLabel})
	if err != nil {
		return 0, fmt.Errorf("listing jobs: %w", err)
	}
	deleted := 0
	background := metav1.DeletePropagationBackground
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if j.DeletionTimestamp != nil || !succeeded(j) {
			continue
		}
		if err := remove(out, o, "job", j.Namespace, j.Name, "it succeeded (gitrepo "+j.Labels[fleet.RepoLabel]+")", func() error {
			return kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: &background})
		}); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

func succeeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == "True" {
			return true
		}
	}
	return false
}

// remove says what goes and why, and deletes it unless it is a dry run.
func remove(out io.Writer, o Options, kind, ns, name, why string, del func() error) error {
	verb := "deleted"
	if o.DryRun {
		verb = "would delete"
	} else if err := del(); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s/%s: %w", kind, ns, name, err)
	}
	fmt.Fprintf(out, "%s %s %s/%s: %s\n", verb, kind, ns, name, why)
	return nil
}
