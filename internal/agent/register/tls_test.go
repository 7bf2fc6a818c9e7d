package register

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every session of a process shares one copy of a CA bundle: a process playing thousands of
// agents must not keep the system store once per agent.
func TestSessionsShareTheirCABundle(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store.pem")
	if err := os.WriteFile(store, []byte(strings.Repeat("SYSTEM\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSL_CERT_FILE", store)
	const ca = "MANAGER CA (shared test)\n"
	c := &Credential{APIServerURL: "https://manager:6443", APIServerCA: ca, Token: "t"}
	a, b := NewSession(c).RESTConfig(), NewSession(c).RESTConfig()
	if got := string(a.CAData); got != CABundle(ca, TLSSystemStore) || !strings.HasPrefix(got, ca) || !strings.Contains(got, "SYSTEM") {
		t.Fatalf("CA data %.40q... is not the CA followed by the system store", got)
	}
	if &a.CAData[0] != &b.CAData[0] {
		t.Fatal("two sessions with the same CA hold two copies of its bundle")
	}
	strict := NewSession(c)
	strict.TLSMode = TLSStrict
	if got := string(strict.RESTConfig().CAData); got != ca {
		t.Fatalf("strict mode trusts %.40q..., want the CA alone", got)
	}
}
