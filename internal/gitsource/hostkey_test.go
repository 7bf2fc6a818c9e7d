package gitsource

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func newHostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// insecureSkipHostKeyChecks trusts hosts known_hosts does not name; a named host with another
// key is refused all the same, and without it an unnamed host is refused.
func TestHostKeyCallbackTrustUnknown(t *testing.T) {
	known, other := newHostKey(t), newHostKey(t)
	line := knownhosts.Line([]string{"git.example:22"}, known)
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 22}
	for _, tc := range []struct {
		trustUnknown bool
		host         string
		key          ssh.PublicKey
		ok           bool
	}{
		{false, "git.example:22", known, true},
		{false, "git.example:22", other, false},
		{false, "elsewhere.example:22", other, false},
		{true, "git.example:22", other, false},
		{true, "elsewhere.example:22", other, true},
	} {
		cb, err := HostKeyCallback([]byte(line+"\n"), tc.trustUnknown)
		if err != nil {
			t.Fatal(err)
		}
		if err := cb(tc.host, addr, tc.key); (err == nil) != tc.ok {
			t.Errorf("trustUnknown %v, host %s: error %v, want ok=%v", tc.trustUnknown, tc.host, err, tc.ok)
		}
	}
}
