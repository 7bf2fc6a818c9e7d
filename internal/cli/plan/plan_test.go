package plan

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	clitarget "github.com/fleetgo/fleet/internal/cli/target"
	"github.com/fleetgo/fleet/internal/harness/golden"
	"github.com/fleetgo/fleet/internal/manifestdiff"
)

// fixture plans testdata/head against testdata/base for the three clusters of
// testdata/clusters.yaml: a chart with templated values and a targetCustomization, a kustomize
// bundle with an overlay per env, a Secret, and (in head) a folder whose fleet.yaml does not parse.
func fixture(t *testing.T) *Report {
	t.Helper()
	data, err := os.ReadFile("testdata/targets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tf bundlebuild.TargetsFile
	if err := yaml.UnmarshalStrict(data, &tf); err != nil {
		t.Fatal(err)
	}
	o := bundlereader.Options{Name: "shop", Namespace: "fleet-default", Targets: tf.Targets, TargetRestrictions: tf.TargetRestrictions}
	var ti clitarget.Input
	if err := clitarget.ReadObjects("testdata/clusters.yaml", &ti); err != nil {
		t.Fatal(err)
	}
	in := Input{Targeting: ti, Redact: manifestdiff.NewRedactorWithKey("golden")}
	for side, s := range map[string]*Side{"base": &in.Base, "head": &in.Head} {
		abs, _ := filepath.Abs(filepath.Join("testdata", side))
		if *s, err = Read(&Checkout{Dir: abs, Commit: side + "0000000"}, []string{"."}, o); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestGoldenFormats(t *testing.T) {
	r := fixture(t)
	var text, md, js bytes.Buffer
	if err := Text(&text, r, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Markdown(&md, r, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "plan.txt", text.Bytes())
	golden.Check(t, "plan.md", md.Bytes())
	golden.Check(t, "plan.json", js.Bytes())
	for _, out := range []string{text.String(), md.String(), js.String()} {
		if strings.Contains(out, "hunter2") || strings.Contains(out, "correct-horse") {
			t.Fatal("a Secret's value shows")
		}
	}
}

func TestWhatThePlanSays(t *testing.T) {
	r := fixture(t)
	by := map[string]BundleReport{}
	for _, b := range r.Bundles {
		by[b.Name] = b
	}
	web := by["shop-web"]
	// Every cluster changes its tag; clusters whose diffs read the same (region eu) are one
	// group, the other region another.
	if len(web.Groups) != 2 || web.Unchanged != 0 || strings.Join(web.Groups[0].Clusters, ",") != "fleet-default/dev-1,fleet-default/prod-1" ||
		Summary(web.Groups[0].Diff) != "image: registry.example/web:1.0 -> registry.example/web:1.1" {
		t.Fatalf("web: %+v", web)
	}
	api := by["shop-api"]
	if len(api.Groups) != 1 || strings.Join(api.Groups[0].Clusters, ",") != "fleet-default/prod-1,fleet-default/prod-2" || api.Unchanged != 1 ||
		Summary(api.Groups[0].Diff) != "logLevel: warn -> error" {
		t.Fatalf("api: %+v", api)
	}
	creds := by["shop-creds"]
	if len(creds.Groups) != 1 || len(creds.Groups[0].Clusters) != 3 || !strings.Contains(creds.Groups[0].Diff, "password: (redacted") ||
		strings.Contains(creds.Groups[0].Diff, "user: (redacted") == false {
		t.Fatalf("creds: %+v", creds)
	}
	if strings.Count(creds.Groups[0].Diff, "\n-") != 1 {
		t.Fatalf("only the changed value differs:\n%s", creds.Groups[0].Diff)
	}
	broken := by["broken/fleet.yaml"]
	if !strings.Contains(broken.Error, "broken/fleet.yaml") || !strings.Contains(broken.Error, "fleet.yaml:3: malformed YAML") {
		t.Fatalf("broken: %+v", broken)
	}
}

func TestMarkdownIsCapped(t *testing.T) {
	r := fixture(t)
	var md bytes.Buffer
	cut, err := Markdown(&md, r, 1200, "plan.md")
	if err != nil || !cut || md.Len() > 1400 || !strings.Contains(md.String(), "see `plan.md`") {
		t.Fatalf("cut %v, %d bytes:\n%s", cut, md.Len(), md.String())
	}
}

// With --live head is compared with what runs, and a cluster running something other than base
// renders is flagged as drifted.
func TestLive(t *testing.T) {
	r := fixture(t)
	baseRender := map[string]string{}
	for c, m := range r.heads["shop-api"] {
		baseRender[c] = m.out // head's render, as if head were deployed already
	}
	data, err := os.ReadFile("testdata/targets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tf bundlebuild.TargetsFile
	_ = yaml.UnmarshalStrict(data, &tf)
	var ti clitarget.Input
	_ = clitarget.ReadObjects("testdata/clusters.yaml", &ti)
	o := bundlereader.Options{Name: "shop", Namespace: "fleet-default", Targets: tf.Targets, TargetRestrictions: tf.TargetRestrictions}
	in := Input{Targeting: ti, Redact: manifestdiff.NewRedactorWithKey("golden")}
	for side, s := range map[string]*Side{"base": &in.Base, "head": &in.Head} {
		abs, _ := filepath.Abs(filepath.Join("testdata", side))
		*s, _ = Read(&Checkout{Dir: abs, Commit: side}, []string{"."}, o)
	}
	// prod-1 runs head already; prod-2 runs something else; dev-1 runs nothing yet.
	in.Live = map[string]map[string]string{"shop-api": {
		"fleet-default/prod-1": baseRender["fleet-default/prod-1"],
		"fleet-default/prod-2": strings.Replace(baseRender["fleet-default/prod-2"], "logLevel: error", "logLevel: hotfix", 1),
	}}
	live, err := Run(in)
	if err != nil {
		t.Fatal(err)
	}
	var api BundleReport
	for _, b := range live.Bundles {
		if b.Name == "shop-api" {
			api = b
		}
	}
	got := map[string][]string{}
	for _, g := range api.Groups {
		got[g.Change] = append(got[g.Change], g.Clusters...)
	}
	if strings.Join(got[Drifted], ",") != "fleet-default/prod-1,fleet-default/prod-2" || strings.Join(got[Added], ",") != "fleet-default/dev-1" ||
		strings.Join(got[Changed], ",") != "fleet-default/prod-2" || api.Unchanged != 1 {
		t.Fatalf("%+v (unchanged %d)", got, api.Unchanged)
	}
}
