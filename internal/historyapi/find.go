// Package historyapi reads the deployment history through the API (the records of a Bundle,
// GitRepo or HelmOp: Find) and writes rollbacks (Rollback: the holds of a BundleHistory), for
// `fleet history`, `fleet rollback` and the UI, as the user (docs/history.md).
package historyapi

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/history"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Bundle is one Bundle's record.
type Bundle struct {
	Name   string
	Record *history.Record
}

// Find reads the records NAME stands for in the namespace: the Bundle of that name, else those
// of the GitRepo or HelmOp of that name; "" stands for every Bundle of the namespace.
func Find(api fleetcontrollers.Interface, namespace, name string) ([]Bundle, error) {
	var tables []fleet.BundleHistory
	if name != "" {
		t, err := api.BundleHistory().Get(namespace, name, metav1.GetOptions{})
		switch {
		case err == nil:
			tables = []fleet.BundleHistory{*t}
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	selectors := []string{fleet.RepoLabel, fleet.HelmNameLabel}
	if name == "" {
		selectors = []string{""}
	}
	for _, key := range selectors {
		if len(tables) > 0 {
			break
		}
		opts := metav1.ListOptions{}
		if key != "" {
			opts.LabelSelector = labels.SelectorFromSet(labels.Set{key: name}).String()
		}
		list, err := api.BundleHistory().List(namespace, opts)
		if err != nil {
			return nil, err
		}
		tables = list.Items
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("no deployment history of %q in namespace %s: no Bundle, GitRepo or HelmOp of that name has run anywhere since the manager records history", name, namespace)
	}
	return records(api, namespace, tables)
}

func records(api fleetcontrollers.Interface, namespace string, tables []fleet.BundleHistory) ([]Bundle, error) {
	slices.SortFunc(tables, func(a, b fleet.BundleHistory) int { return strings.Compare(a.Name, b.Name) })
	out := make([]Bundle, 0, len(tables))
	for i := range tables {
		t := &tables[i]
		list, err := api.BundleRevision().List(namespace, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{fleet.HistoryBundleLabel: t.Name}).String()})
		if err != nil {
			return nil, err
		}
		var revs []*fleet.BundleRevision
		for j := range list.Items {
			if list.Items[j].Spec.Bundle == t.Name {
				revs = append(revs, &list.Items[j])
			}
		}
		out = append(out, Bundle{Name: t.Name, Record: history.FromObjects(t, revs)})
	}
	return out, nil
}

// Names says whether the revision is the one id names: the revision itself, or its commit (or
// the commit's first 7 or more characters).
func Names(rev history.Revision, id string) bool {
	return rev.Revision == id || rev.Commit != "" && (rev.Commit == id || len(id) >= 7 && strings.HasPrefix(rev.Commit, id))
}
