package controller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	lassoclient "github.com/rancher/lasso/pkg/client"
	"github.com/rancher/wrangler/v3/pkg/schemes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/rest"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Cluster as the apiserver sends it on a watch (check-in of a simulated agent).
const clusterJSON = `{"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster","metadata":{"creationTimestamp":"2026-12-04T04:41:47Z",` +
	`"generation":1,"labels":{"env":"bench","management.cattle.io/cluster-display-name":"c-00001"},"managedFields":[{"apiVersion":` +
	`"fleet.cattle.io/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:env":{}}},"f:spec":{".":{}}},` +
	`"manager":"fleet","operation":"Update","time":"2026-12-04T04:41:47Z"}],"name":"cluster-0007d8c20cdc","namespace":"fleet-default",` +
	`"resourceVersion":"23114","uid":"6b0c3c52-40a5-4c31-9a4f-6c0a1b7bb0e6"},"spec":{"clientID":"c-00001"},"status":{"agent":{` +
	`"lastSeen":"2026-12-04T04:45:30Z","namespace":"cattle-fleet-system"},"conditions":[{"lastUpdateTime":"2026-12-04T04:41:49Z",` +
	`"status":"True","type":"Ready"}],"display":{"readyBundles":"6/6"},"namespace":"cluster-fleet-default-c-00001-1a2b3c",` +
	`"summary":{"desiredReady":6,"ready":6}}}`

func TestLeadingMetaReadsWhatApimachineryReads(t *testing.T) {
	docs := []string{
		clusterJSON,
		`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"}}`,
		" \n{ \"apiVersion\" : \"apps/v1\" ,\t\"kind\" : \"Deployment\" }",
		`{"apiVersion":"v1","kind":"Status","status":"Failure","reason":"AlreadyExists","code":409}`,
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"Secret"}}`,
		`{"type":"MODIFIED","object":` + clusterJSON + `}`,
		`{"type":"ADDED","kind":"Secret"}`,
		`{"type":"ADDED","type":"x","object":{}}`,
		`{"object":{},"type":"ADDED"}`,
		`{"apiVersion":"v1","object":{}}`,
		`{"metadata":{},"apiVersion":"v1","kind":"Secret"}`,
		`{"apiVersion":"v1","metadata":{},"kind":"Secret"}`,
		`{"apiVersion":"v\u0031","kind":"Secret"}`,
		`{"api\u0056ersion":"v1","kind":"Secret"}`,
		`{"APIVERSION":"v1","Kind":"Secret"}`,
		`{"apiVersion":"v1","apiVersion":"v2"}`,
		`{"apiVersion":"v1"}`,
		`{"kind":"Secret"}`,
		`{"apiVersion":"a/b/c","kind":"Secret"}`,
		`{"apiVersion":1,"kind":"Secret"}`,
		`{}`,
		`[]`,
		`{"apiVersion":"v1","kind":"Secret"`,
		`{"apiVersion":"v1","kind":"Sec`,
		``,
	}
	for _, doc := range docs {
		want, wantErr := kjson.DefaultMetaFactory.Interpret([]byte(doc))
		got, gotErr := leadingMeta{}.Interpret([]byte(doc))
		if wantErr != nil {
			// Apimachinery refuses it; the full decode after either refuses it too, so only a
			// document whose start is well formed may get past here.
			if gotErr == nil && json.Valid([]byte(doc)) {
				t.Errorf("%q: apimachinery says %v, leadingMeta read %v", doc, wantErr, got)
			}
			continue
		}
		if gotErr != nil || *got != *want {
			t.Errorf("%q: apimachinery read %v, leadingMeta %v (%v)", doc, want, got, gotErr)
		}
	}
}

func TestLeadingMetaReadsOnlyTheStart(t *testing.T) {
	for doc, want := range map[string]bool{
		clusterJSON: true,
		`{"kind":"Secret","apiVersion":"v1","data":`:        true,
		`{"metadata":{},"apiVersion":"v1","kind":"Secret"}`: false,
		`{"apiVersion":"v\u0031","kind":"Secret"}`:          false,
		`{"apiVersion":"v1","apiVersion":"v2","kind":"X"}`:  false,
		`{"type":"MODIFIED","object":` + clusterJSON + `}`:  true,
		`{"type":"MODIFIED","kind":"X"}`:                    false,
	} {
		if _, _, ok := leadingTypeMeta([]byte(doc)); ok != want {
			t.Errorf("%q: read from the start %v, want %v", doc, ok, want)
		}
	}
}

func FuzzLeadingMeta(f *testing.F) {
	f.Add(clusterJSON)
	f.Add(`{"kind":"Secret","apiVersion":"v1"}`)
	f.Add(`{"apiVersion":"v1","kind":"Sec\"ret"}`)
	f.Add(`{"type":"ADDED","object":{"apiVersion":"v1","kind":"Secret"}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		if !json.Valid([]byte(doc)) {
			return
		}
		want, wantErr := kjson.DefaultMetaFactory.Interpret([]byte(doc))
		got, gotErr := leadingMeta{}.Interpret([]byte(doc))
		if (wantErr == nil) != (gotErr == nil) || (wantErr == nil && *got != *want) {
			// Duplicate or differently cased members after the first two are the only way the
			// two may differ; the apiserver writes neither.
			var m map[string]any
			if json.Unmarshal([]byte(doc), &m) == nil && m["apiVersion"] == want.GroupVersion().String() {
				t.Errorf("%q: apimachinery read %v (%v), leadingMeta %v (%v)", doc, want, wantErr, got, gotErr)
			}
		}
	})
}

// The manager's clients decode with leadingMeta: the document below is a Cluster by its first two
// members (as leadingMeta reads it) and a Bundle by apimachinery's own factory (the last "kind"):
// read through the client into a Cluster, it fills the Cluster only with leadingMeta.
func TestClientsDecodeWithLeadingMeta(t *testing.T) {
	doc := `{"apiVersion":"fleet.cattle.io/v1alpha1","kind":"Cluster","kind":"Bundle","metadata":{"name":"a"},` +
		`"status":{"display":{"readyBundles":"6/6"}}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(doc))
	}))
	defer srv.Close()
	base, err := lassoclient.NewSharedClientFactory(&rest.Config{Host: srv.URL}, &lassoclient.SharedClientFactoryOptions{Scheme: schemes.All})
	if err != nil {
		t.Fatal(err)
	}
	f := &leadingMetaClients{SharedClientFactory: base, scheme: schemes.All}
	gvr := fleet.SchemeGroupVersion.WithResource("clusters")
	c := f.ForResourceKind(gvr, "Cluster", true)
	if c.RESTClient != f.rest || f.ForResourceKind(gvr, "Cluster", true) != c {
		t.Fatal("the client was not given the leadingMeta REST client once")
	}
	got := &fleet.Cluster{}
	if err := c.Get(context.Background(), "fleet-default", "a", got, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got.Name != "a" || got.Status.Display.ReadyBundles != "6/6" {
		t.Fatalf("read %+v: not decoded with leadingMeta", got)
	}
}

func BenchmarkInterpret(b *testing.B) {
	for name, mf := range map[string]kjson.MetaFactory{"apimachinery": kjson.DefaultMetaFactory, "leading": leadingMeta{}} {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if _, err := mf.Interpret([]byte(clusterJSON)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
