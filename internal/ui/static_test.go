package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A static server shows each fixed object on its kind's page; actions fail.
func TestStaticServerShowsEachKindsObjects(t *testing.T) {
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace, Labels: labels}
	}
	s, err := NewStatic([]runtime.Object{
		&fleet.GitRepo{ObjectMeta: meta("shop", nil)},
		&fleet.Bundle{ObjectMeta: meta("shop-web", map[string]string{fleet.RepoLabel: "shop"})},
		// A group and a cluster of one name: each kind keeps its own.
		&fleet.ClusterGroup{ObjectMeta: meta("edge-1", nil)},
		&fleet.Cluster{ObjectMeta: meta("edge-1", nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return string(body)
	}
	for path, want := range map[string]string{"/": "shop", "/clusters": "edge-1", "/clustergroups": "edge-1",
		"/gitrepos/fleet-default/shop": "shop-web"} {
		if !strings.Contains(get(path), want) {
			t.Errorf("%s does not show %s", path, want)
		}
	}
	resp, err := http.PostForm(srv.URL+"/actions", map[string][]string{"kind": {"GitRepo"}, "namespace": {fleet.DefaultNamespace},
		"name": {"shop"}, "op": {"pause"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an action on fixed objects: %s", resp.Status)
	}
}
