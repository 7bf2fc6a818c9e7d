package index

import (
	"testing"
	"time"

	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestParent(t *testing.T) {
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-ns", Name: "app",
		Labels: map[string]string{fleet.BundleNamespaceLabel: "fleet-default", fleet.BundleLabel: "repo-app", fleet.RepoLabel: "repo"}}}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "repo-app",
		Labels: map[string]string{fleet.RepoLabel: "repo"}}}
	var gone *fleet.BundleDeployment
	for _, tc := range []struct {
		name     string
		resolver relatedresource.Resolver
		ns       string
		obj      any
		want     []relatedresource.Key
	}{
		{"a deployment's bundle", Parent(fleet.BundleNamespaceLabel, fleet.BundleLabel), "cluster-ns", bd,
			[]relatedresource.Key{{Namespace: "fleet-default", Name: "repo-app"}}},
		{"a deployment's gitrepo", Parent(fleet.BundleNamespaceLabel, fleet.RepoLabel), "cluster-ns", bd,
			[]relatedresource.Key{{Namespace: "fleet-default", Name: "repo"}}},
		{"a bundle's gitrepo, in its namespace", Parent("", fleet.RepoLabel), "fleet-default", b,
			[]relatedresource.Key{{Namespace: "fleet-default", Name: "repo"}}},
		{"no label, no parent", Parent("", fleet.HelmNameLabel), "fleet-default", b, nil},
		{"deleted (a nil object)", Parent("", fleet.RepoLabel), "fleet-default", gone, nil},
		{"deleted (no object)", Parent("", fleet.RepoLabel), "fleet-default", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var keys []relatedresource.Key
			var err error
			switch o := tc.obj.(type) {
			case *fleet.BundleDeployment:
				keys, err = tc.resolver(tc.ns, "x", o)
			case *fleet.Bundle:
				keys, err = tc.resolver(tc.ns, "x", o)
			default:
				keys, err = tc.resolver(tc.ns, "x", nil)
			}
			if err != nil || len(keys) != len(tc.want) || (len(keys) == 1 && keys[0] != tc.want[0]) {
				t.Fatalf("keys %v, err %v, want %v", keys, err, tc.want)
			}
		})
	}
}

type queue struct{ got []string }

func (q *queue) EnqueueAfter(ns, name string, d time.Duration) {
	q.got = append(q.got, ns+"/"+name+" "+d.String())
}

func TestAfter(t *testing.T) {
	q := &queue{}
	After{Queue: q, Delay: time.Second}.Enqueue("ns", "parent")
	if len(q.got) != 1 || q.got[0] != "ns/parent 1s" {
		t.Fatalf("enqueued %v", q.got)
	}
}
