package cmd

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleet status fails with one line saying why: wrong arguments, or a manager nobody answers for.
func TestStatusBadInput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: "http://`+addr+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: m, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--kubeconfig", kubeconfig}, "give a GITREPO, or --all"},
		{[]string{"status", "--kubeconfig", kubeconfig, "app", "--all"}, "not both"},
		{[]string{"status", "--kubeconfig", kubeconfig, "app", "-o", "yaml"}, `--output "yaml": only json`},
		{[]string{"status", "--kubeconfig", kubeconfig, "app"}, "cannot reach the manager at http://" + addr},
	} {
		root := New()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error has more than one line: %q", tc.args, err)
		}
	}
}
