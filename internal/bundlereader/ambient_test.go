package bundlereader

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// fleet plan and fleet apply run on CI runners and developers' machines, over a pull request's
// fleet.yaml: an oci:// chart is pulled with the credentials given for it and never with the
// host's Docker or Helm registry logins, and a git::ssh chart never with the host's ssh-agent.
func TestChartsUseNoAmbientCredentials(t *testing.T) {
	var authorized atomic.Int32
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			authorized.Add(1)
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	home := t.TempDir()
	login := `{"auths":{"` + host + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("ci:host-secret")) + `"}}}`
	for _, dir := range []string{filepath.Join(home, ".docker"), filepath.Join(home, "helm")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".docker", "config.json"), []byte(login), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "helm", "config.json"), []byte(login), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, ".docker"))
	t.Setenv("HELM_REGISTRY_CONFIG", filepath.Join(home, "helm", "config.json"))

	_, _, err := FetchChart(context.Background(), &fleet.HelmOptions{Chart: "oci://" + host + "/charts/web", Version: "1.0.0"}, ChartAuth{PlainHTTP: true})
	if err == nil {
		t.Fatal("the registry refuses every pull, yet the chart was fetched")
	}
	if n := authorized.Load(); n != 0 {
		t.Fatalf("%d requests carried the host's registry login", n)
	}

	// The ssh-agent: a socket that counts who connects.
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var agentUsed atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			agentUsed.Add(1)
			_ = c.Close()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	git := httptest.NewServer(http.NotFoundHandler()) // an address nothing answers SSH on
	defer git.Close()
	ref := "git::ssh://git@" + strings.TrimPrefix(git.URL, "http://") + "/org/charts.git//web"
	_, err = fetchGitChart(context.Background(), ref, false, ChartAuth{})
	if err == nil || !strings.Contains(err.Error(), "ssh-agent is never used") {
		t.Fatalf("an SSH chart without a key: %v", err)
	}
	if n := agentUsed.Load(); n != 0 {
		t.Fatalf("the ssh-agent was asked %d times", n)
	}
}
