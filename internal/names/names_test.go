package names

import (
	"os"
	"strings"
	"testing"
)

func TestBundleName(t *testing.T) {
	tests := []struct{ repo, path, want string }{
		{"simple-namespace", "namespace", "simple-namespace-namespace"},
		{"sample", "simple", "sample-simple"},
		{"sample", "/", "sample"},
		{"sample", ".", "sample"},
		{"sample", "", "sample"},
		{"sample", "./multi-cluster/helm/", "sample-multi-cluster-helm"},
		{"ex", "My_Apps/guestbook", "ex-my-apps-guestbook-e203f022"},
	}
	for _, tt := range tests {
		if got := BundleName(tt.repo, tt.path); got != tt.want {
			t.Errorf("BundleName(%q, %q) = %q, want %q", tt.repo, tt.path, got, tt.want)
		}
	}
}

// Every name Fleet derives in ../shared/reference/fleet-names.tsv (copied to testdata, and
// checked against the original when it is there) comes out the same here.
func TestFleetNameVectors(t *testing.T) {
	data, err := os.ReadFile("testdata/fleet-names.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if orig, err := os.ReadFile("../../../shared/reference/fleet-names.tsv"); err == nil && string(orig) != string(data) {
		t.Fatal("testdata/fleet-names.tsv differs from ../shared/reference/fleet-names.tsv: copy it again")
	}
	rules := map[string]func(string) string{
		"bundle-name": FleetBundleName,
		"cluster-namespace": func(in string) string {
			ns, name, _ := strings.Cut(in, "/")
			return ClusterNamespace(ns, name)
		},
		"cluster-name": func(in string) string { return "cluster-" + HashPrefix(in, 12) },
		"safe-concat":  func(in string) string { return SafeConcatName(strings.Split(in, "|")...) },
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("malformed vector %q", line)
		}
		rule, ok := rules[f[0]]
		if !ok {
			t.Fatalf("unknown rule %q", f[0])
		}
		if got := rule(f[1]); got != f[2] {
			t.Errorf("%s(%q) = %q, Fleet has %q", f[0], f[1], got, f[2])
		}
		n++
	}
	if n < 27 {
		t.Fatalf("only %d vectors read", n)
	}
}

func TestHelmReleaseNameShortensWithHash(t *testing.T) {
	long := "my-very-long-gitrepo-name-for-testing-purposes-" + strings.Repeat("x", 20)
	a := HelmReleaseName(long + "a")
	b := HelmReleaseName(long + "b")
	if len(a) > MaxHelmReleaseName || len(b) > MaxHelmReleaseName {
		t.Fatalf("too long: %q (%d), %q (%d)", a, len(a), b, len(b))
	}
	if a == b {
		t.Fatalf("distinct inputs must give distinct names, both %q", a)
	}
	if !dnsSubdomain.MatchString(a) {
		t.Fatalf("%q is not DNS-safe", a)
	}
	if HelmReleaseName(long+"a") != a {
		t.Fatal("names must be stable")
	}
	if got := HelmReleaseName("ok-name"); got != "ok-name" {
		t.Fatalf("a valid name is kept, got %q", got)
	}
}

func TestSafeConcatName(t *testing.T) {
	if got := SafeConcatName("cluster", "fleet-default", "c-abc"); got != "cluster-fleet-default-c-abc" {
		t.Fatalf("got %q", got)
	}
	long := SafeConcatName("cluster", strings.Repeat("n", 40), strings.Repeat("c", 40))
	if len(long) != 63 {
		t.Fatalf("len %d, want 63: %q", len(long), long)
	}
	dash := SafeConcatName(strings.Repeat("n", 56), strings.Repeat("c", 40))
	if len(dash) != 63 || dash[56] != '-' {
		t.Fatalf("a dash at character 57 is dropped, 6 hex digits follow: %q", dash)
	}
}

func TestClusterNamespace(t *testing.T) {
	a := ClusterNamespace("fleet-default", "c-1")
	if !strings.HasPrefix(a, "cluster-fleet-default-c-1-") || len(a) != len("cluster-fleet-default-c-1-")+12 {
		t.Fatalf("got %q", a)
	}
	if ClusterNamespace("fleet-default", "c-2") == a || ClusterNamespace("a-b", "c") == ClusterNamespace("a", "b-c") {
		t.Fatal("distinct clusters need distinct namespaces, even when their joined names are equal")
	}
	long := ClusterNamespace(strings.Repeat("n", 50), strings.Repeat("c", 50))
	if len(long) > MaxDNSLabel {
		t.Fatalf("too long: %q", long)
	}
}
