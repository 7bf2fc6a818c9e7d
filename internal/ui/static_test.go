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

// The alerts page shows each Alert's provider, what it reports on, and its last delivery or why
// it failed.
func TestAlertsPageShowsLastDelivery(t *testing.T) {
	now := metav1.Now()
	ok := &fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: "rollouts", Namespace: fleet.DefaultNamespace},
		Spec:   fleet.AlertSpec{ProviderRef: "slack", Sources: []fleet.AlertSource{{Kind: "GitRepo", Name: "shop"}}},
		Status: fleet.AlertStatus{LastSent: &now, LastMessage: "shop-web revision abc complete"}}
	fleet.SetCondition(&ok.Status.Conditions, fleet.ConditionDelivered, "True", "", "", now.Time)
	failing := &fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: "checks", Namespace: fleet.DefaultNamespace},
		Spec:   fleet.AlertSpec{ProviderRef: "github", Sources: []fleet.AlertSource{{Kind: "Bundle"}}},
		Status: fleet.AlertStatus{LastError: "alertprovider github: POST https://api.github.com/...: refused: status 401"}}
	fleet.SetCondition(&failing.Status.Conditions, fleet.ConditionDelivered, "False", "Failed", failing.Status.LastError, now.Time)
	s, err := NewStatic([]runtime.Object{ok, failing})
	if err != nil {
		t.Fatal(err)
	}
	title, body, found := s.render("/alerts")
	if !found || title != "Alerts" {
		t.Fatalf("/alerts: %q %v", title, found)
	}
	for _, want := range []string{`data-name="fleet-default/rollouts"`, "GitRepo shop", "Delivered", "shop-web revision abc complete",
		"Bundle *", "Failing", "status 401"} {
		if !strings.Contains(body, want) {
			t.Errorf("the alerts page does not show %q:\n%s", want, body)
		}
	}
}

// A bundle with sealed secrets names them, and each cluster where they are not unsealed yet.
func TestRepoPageShowsSealedSecrets(t *testing.T) {
	labels := func(cluster string) map[string]string {
		return map[string]string{fleet.RepoLabel: "shop", fleet.BundleLabel: "shop-db", fleet.BundleNamespaceLabel: fleet.DefaultNamespace,
			fleet.ClusterLabel: cluster, fleet.ClusterNamespaceLabel: fleet.DefaultNamespace}
	}
	sealed := []fleet.SealedFile{{Name: "db.yaml", Sealed: []byte("x"), Source: "s"}}
	done := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "shop-db", Namespace: "cluster-a", Labels: labels("a")},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "d1", SealedFiles: sealed}, Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: "d1", Ready: true, NonModified: true}}
	waiting := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "shop-db", Namespace: "cluster-b", Labels: labels("b")},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "d1", SealedFiles: sealed}}
	s, err := NewStatic([]runtime.Object{&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: fleet.DefaultNamespace}},
		&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "shop-db", Namespace: fleet.DefaultNamespace, Labels: map[string]string{fleet.RepoLabel: "shop"}}},
		done, waiting})
	if err != nil {
		t.Fatal(err)
	}
	_, body, found := s.render("/gitrepos/fleet-default/shop")
	if !found {
		t.Fatal("no page")
	}
	for _, want := range []string{"Secrets db.yaml: sealed to 2 clusters, unsealed on 1", "secrets not unsealed yet"} {
		if !strings.Contains(body, want) {
			t.Errorf("the GitRepo page does not show %q:\n%s", want, body)
		}
	}
	if strings.Count(body, "secrets not unsealed yet") != 1 {
		t.Errorf("not one cluster waiting:\n%s", body)
	}
}
