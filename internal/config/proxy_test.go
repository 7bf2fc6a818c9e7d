package config

import (
	"os"
	"path/filepath"
	"testing"
)

// Only the file the chart names is the proxy's CA: the system's CA directory in SSL_CERT_DIR is
// not handed on to Jobs and agents.
func TestProxyCAFromEnv(t *testing.T) {
	system := t.TempDir()
	if err := os.WriteFile(filepath.Join(system, "ca-certificates.crt"), []byte("SYSTEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_DIR", system)
	t.Setenv(ProxyCAFileEnv, "")
	if ca := ProxyCAFromEnv(); ca != nil {
		t.Fatalf("without %s: %q, want none", ProxyCAFileEnv, ca)
	}
	file := filepath.Join(t.TempDir(), "proxy-ca.crt")
	if err := os.WriteFile(file, []byte("PROXY"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(ProxyCAFileEnv, file)
	if ca := string(ProxyCAFromEnv()); ca != "PROXY" {
		t.Fatalf("got %q, want the proxy's CA", ca)
	}
	t.Setenv(ProxyCAFileEnv, filepath.Join(t.TempDir(), "missing"))
	if ca := ProxyCAFromEnv(); ca != nil {
		t.Fatalf("a missing file gave %q", ca)
	}
}

func TestProxyEnv(t *testing.T) {
	t.Setenv("HTTP_PROXY", "")
	t.Setenv("HTTPS_PROXY", "http://proxy:3128")
	t.Setenv("NO_PROXY", ".svc")
	got := ProxyEnv()
	if len(got) != 2 || got["HTTPS_PROXY"] != "http://proxy:3128" || got["NO_PROXY"] != ".svc" {
		t.Fatalf("ProxyEnv = %v", got)
	}
}
