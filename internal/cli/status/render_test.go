package status

import (
	"bytes"
	"testing"
	"time"

	"github.com/fleetgo/fleet/internal/harness/golden"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func report() *Report {
	seen, long := now.Add(-20*time.Second), now.Add(-12*time.Minute)
	return &Report{GitRepos: []GitRepo{{
		Namespace: "fleet-default", Name: "shop", Repo: "https://git.example/shop.git",
		Commit: "1a2b3c4d5e6f", LatestCommit: "9f8e7d6c5b4a", State: "NotReady", ReadyClusters: 1, DesiredReadyClusters: 3,
		Error: "NotReady(1) [Cluster fleet-default/prod: deployment.apps shop/web: 1/2 replicas]\nsecond line", Complete: true,
		Bundles: []Bundle{
			{Name: "shop-db", State: "Ready", Ready: 3, Desired: 3, Secrets: []string{"db.yaml"}, Clusters: []Cluster{
				{Name: "dev", State: "Ready", LastSeen: &seen, Sealed: "unsealed"}, {Name: "edge", State: "Ready", LastSeen: &seen, Sealed: "waiting"},
				{Name: "prod", State: "Ready", LastSeen: &seen, Sealed: "unsealed"}}},
			{Name: "shop-web", State: "NotReady", Ready: 1, Desired: 3,
				Held: "1 of 1 clusters held at revision 4370e60a1417 (commit 0badc0ffee00) since 2026-11-25T11:50:00Z: incident 42; the Bundle's next revision releases them (or fleet rollback --release)",
				Clusters: []Cluster{
					{Name: "dev", State: "Ready", LastSeen: &seen},
					{Name: "edge", State: "WaitApplied", OlderCommit: "0badc0ffee00", LastSeen: &long, Offline: true, HeldAt: "4370e60a1417"},
					{Name: "prod", State: "NotReady", LastSeen: &seen, Message: "deployment.apps shop/web: 1/2 replicas"}}},
		}}, {
		Namespace: "fleet-local", Name: "empty", Repo: "https://git.example/empty.git", State: "Stalled",
		Error: "fleet.yaml: unknown field defaultNamespce (did you mean defaultNamespace?)", Bundles: []Bundle{},
	}}}
}

func TestPrintPlain(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, report(), Style{Now: now}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "plain.golden", b.Bytes())
}

func TestPrintColor(t *testing.T) {
	var b bytes.Buffer
	if err := Print(&b, report(), Style{Color: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "color.golden", b.Bytes())
}

func TestPrintJSON(t *testing.T) {
	var b bytes.Buffer
	if err := PrintJSON(&b, report()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "report.json", b.Bytes())
}

func TestProgressAndReady(t *testing.T) {
	r := report()
	if got, want := Progress(r), "1/3 clusters ready, 1 deployments waiting, 1 not ready"; got != want {
		t.Errorf("Progress = %q, want %q", got, want)
	}
	if r.Ready() {
		t.Error("Ready with a NotReady GitRepo")
	}
	r.GitRepos = r.GitRepos[:1]
	r.GitRepos[0].State, r.GitRepos[0].LatestCommit = "Ready", ""
	if !r.Ready() {
		t.Error("not Ready with every GitRepo Ready at its latest commit")
	}
	r.GitRepos[0].LatestCommit = "9f8e7d6c5b4a"
	if r.Ready() {
		t.Error("Ready while a newer commit waits")
	}
}

// Text agents and downstream objects wrote reaches the terminal without the characters a
// terminal acts on: an escape sequence in a message cannot clear the screen or recolour it.
func TestPrintStripsControlCharacters(t *testing.T) {
	r := &Report{GitRepos: []GitRepo{{Namespace: "fleet-default", Name: "shop", State: "NotReady", Complete: true,
		Error: "bad\x1b[2J\x1b]0;owned\x07 end",
		Bundles: []Bundle{{Name: "shop-web", State: "NotReady", Clusters: []Cluster{
			{Name: "prod\x1b[8m", State: "NotReady", Message: "1/2 replicas\x1b[31m \u202eevil\u009b1m\rover"}}}}}}}
	var out bytes.Buffer
	if err := Print(&out, r, Style{Now: now}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"\x1b", "\x07", "\r", "\u202e", "\u009b"} {
		if bytes.Contains(out.Bytes(), []byte(c)) {
			t.Errorf("output holds %q:\n%q", c, out.String())
		}
	}
	if !bytes.Contains(out.Bytes(), []byte("1/2 replicas[31m evil1mover")) || !bytes.Contains(out.Bytes(), []byte("prod[8m")) {
		t.Errorf("the printable rest is kept:\n%q", out.String())
	}
}
