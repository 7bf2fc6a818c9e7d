package helmdeployer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/helmrelease"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		msg       string
		permanent bool
	}{
		{`template: bad/templates/t.yaml:1:10: executing "bad/templates/t.yaml" at <.Values.missing.deeper>: nil pointer evaluating interface {}.deeper`, true},
		{`unable to build kubernetes objects from release manifest: resource mapping not found for name: "g": no matches for kind "Gadget"`, true},
		{`failed to create resource: Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string`, true},
		{`cannot patch "x" with kind Job: Job.batch "x" is invalid: spec.template: field is immutable`, true},
		{`Get "https://127.0.0.1:6443/api": dial tcp 127.0.0.1:6443: connect: connection refused`, false},
		{`context deadline exceeded`, false},
	}
	for _, c := range cases {
		err := classify(errors.New(c.msg))
		if helmrelease.IsPermanent(err) != c.permanent {
			t.Errorf("classify(%q): permanent = %v, want %v", c.msg, helmrelease.IsPermanent(err), c.permanent)
		}
		if err.Error() != c.msg {
			t.Errorf("classify changed the message: %q", err.Error())
		}
	}
	wrapped := fmt.Errorf("deploying: %w", helmrelease.Permanent(errors.New("x")))
	if !helmrelease.IsPermanent(wrapped) {
		t.Error("a wrapped permanent error is not permanent")
	}
}

func TestParseManifest(t *testing.T) {
	objs, err := ParseManifest("---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n- {apiVersion: v1, kind: Secret, metadata: {name: c}}\n")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	if got := strings.Join(names, ","); got != "ConfigMap/a,Secret/b,Secret/c" {
		t.Errorf("objects = %s", got)
	}
	if _, err := ParseManifest("a: [unclosed\n"); err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Errorf("malformed manifest: err = %v", err)
	}
}

func TestPostRendererStampsObjects(t *testing.T) {
	p := &postRenderer{setID: SetID("app"), keep: true}
	out, err := p.Run(bytes.NewBufferString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {team: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ParseManifest(out.String())
	if err != nil || len(objs) != 1 {
		t.Fatalf("objs=%d err=%v", len(objs), err)
	}
	labels, annotations, _ := apply.GetLabelsAndAnnotations(SetID("app"), nil)
	o := objs[0]
	if o.GetLabels()["team"] != "x" || o.GetLabels()[apply.LabelHash] != labels[apply.LabelHash] {
		t.Errorf("labels = %v", o.GetLabels())
	}
	if o.GetAnnotations()[apply.LabelID] != annotations[apply.LabelID] || o.GetAnnotations()[KeepPolicyAnnotation] != KeepPolicy {
		t.Errorf("annotations = %v", o.GetAnnotations())
	}
	p.keep = false
	out, _ = p.Run(bytes.NewBufferString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"))
	if strings.Contains(out.String(), KeepPolicyAnnotation) {
		t.Error("keep policy without keepResources")
	}
}

func TestReleaseMemo(t *testing.T) {
	var m releaseMemo
	now := time.Now()
	if _, ok := m.get("ns/a", now); ok {
		t.Fatal("empty memo answered")
	}
	rel := &Release{Name: "a", Namespace: "ns", Version: 2}
	m.put("ns/a", rel, now)
	m.put("ns/none", nil, now)
	if got, ok := m.get("ns/a", now.Add(ReleaseMemoTTL)); !ok || got != rel {
		t.Fatalf("within the TTL: got %v, %v", got, ok)
	}
	if got, ok := m.get("ns/none", now); !ok || got != nil {
		t.Fatalf("a remembered absence: got %v, %v", got, ok)
	}
	if _, ok := m.get("ns/a", now.Add(ReleaseMemoTTL+time.Millisecond)); ok {
		t.Fatal("answered after the TTL")
	}
	m.forget("ns/a")
	if _, ok := m.get("ns/a", now); ok {
		t.Fatal("answered after forget")
	}
}

func TestAbsentReleaseHidesOnlyUntilCreated(t *testing.T) {
	mem := driver.NewMemory()
	other := &release.Release{Name: "other", Namespace: "ns", Version: 1, Info: &release.Info{Status: release.StatusDeployed}}
	if err := mem.Create("sh.helm.release.v1.other.v1", other); err != nil {
		t.Fatal(err)
	}
	stale := &release.Release{Name: "app", Namespace: "ns", Version: 1, Info: &release.Info{Status: release.StatusDeployed}}
	if err := mem.Create("sh.helm.release.v1.app.v1", stale); err != nil {
		t.Fatal(err)
	}
	a := &absentRelease{Driver: mem, name: "app"}
	if _, err := a.Query(map[string]string{"name": "app", "owner": "helm"}); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("before create: want ErrReleaseNotFound, got %v", err)
	}
	if got, err := a.Query(map[string]string{"name": "other", "owner": "helm"}); err != nil || len(got) != 1 {
		t.Fatalf("another release must pass through: %v %v", got, err)
	}
	// A release that exists after all: writing revision 1 fails, so the install fails.
	if err := a.Create("sh.helm.release.v1.app.v1", stale); !errors.Is(err, driver.ErrReleaseExists) {
		t.Fatalf("want ErrReleaseExists, got %v", err)
	}
	if got, err := a.Query(map[string]string{"name": "app", "owner": "helm"}); err != nil || len(got) != 1 {
		t.Fatalf("after create: want the stored revision, got %v %v", got, err)
	}
}

// Rollbacks and uninstalls wait for an action slot like installs and upgrades: with every slot
// taken they do nothing until one is free (here: until the context ends).
func TestRollbackAndUninstallTakeSlots(t *testing.T) {
	d, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	for range ParallelActions {
		d.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &Release{Name: "app", Namespace: "apps", Version: 1}
	if err := d.Uninstall(ctx, r); !errors.Is(err, context.Canceled) {
		t.Errorf("uninstall with no free slot: %v", err)
	}
	if err := d.Rollback(ctx, r, "", false, false, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("rollback with no free slot: %v", err)
	}
	if len(d.slots) != ParallelActions {
		t.Errorf("slots held %d, want %d", len(d.slots), ParallelActions)
	}
}
