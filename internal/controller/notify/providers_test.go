package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestOwnerRepo(t *testing.T) {
	for url, want := range map[string]string{
		"https://github.com/team/app.git":         "team app",
		"https://gitlab.example/group/sub/app":    "group/sub app",
		"git@github.com:team/app.git":             "team app",
		"ssh://git@git.example:2222/team/app.git": "team app",
	} {
		owner, repo, err := ownerRepo(url)
		if err != nil || owner+" "+repo != want {
			t.Errorf("%s: %q %q %v, want %s", url, owner, repo, err, want)
		}
	}
	if _, _, err := ownerRepo("https://git.example/app.git"); err == nil {
		t.Error("a repository without an owner has a commit status target")
	}
}

// A failed delivery names the provider, the endpoint's scheme and host and the status: never
// the address's path (a webhook's path is its secret) nor the answer's body.
func TestDeliveryErrorsHoldNoSecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("token xoxb-secret is revoked"))
	}))
	defer srv.Close()
	p := &fleet.AlertProvider{Spec: fleet.AlertProviderSpec{Type: fleet.ProviderSlack}}
	p.Name = "slack"
	for addr, want := range map[string]string{
		srv.URL + "/services/T000/B000/SECRETPATH": "alertprovider slack: POST http://" + strings.TrimPrefix(srv.URL, "http://") + "/...: refused: status 403",
		"http://[::1/SECRETPATH":                   "alertprovider slack address: not a URL the manager can post to",
	} {
		err := (&target{p: p, address: addr}).post(context.Background(), map[string]string{"text": "x"}, nil)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "SECRETPATH") || strings.Contains(err.Error(), "xoxb") {
			t.Errorf("%s: %v", addr, err)
		}
	}
}
