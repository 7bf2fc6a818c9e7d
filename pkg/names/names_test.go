package names

import (
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
		{"Sample", "Single_Cluster/Manifests", "sample-single-cluster-manifests"},
	}
	for _, tt := range tests {
		if got := BundleName(tt.repo, tt.path); got != tt.want {
			t.Errorf("BundleName(%q, %q) = %q, want %q", tt.repo, tt.path, got, tt.want)
		}
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
	if len(long) != MaxDNSLabel {
		t.Fatalf("len %d, want %d: %q", len(long), MaxDNSLabel, long)
	}
	if SafeConcatName("a.b", "C") != "a-b-c" {
		t.Fatalf("got %q", SafeConcatName("a.b", "C"))
	}
}

func TestClusterNamespace(t *testing.T) {
	a := ClusterNamespace("fleet-default", "c-1")
	if !strings.HasPrefix(a, "cluster-fleet-default-c-1-") || len(a) != len("cluster-fleet-default-c-1-")+8 {
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
