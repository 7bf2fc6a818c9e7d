package register

import (
	"os"
	"strings"
	"sync"
)

// TLS modes of the agent's connection to the manager (Fleet's agentTLSMode).
const (
	// TLSSystemStore trusts the system's CA store as well as the configured apiServerCA.
	TLSSystemStore = "system-store"
	// TLSStrict trusts only the configured apiServerCA.
	TLSStrict = "strict"
)

// systemBundles are the files where Linux distributions (and the agent image) keep the system
// CA store, as Go's own crypto/x509 looks for them; SSL_CERT_FILE comes first when set.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// CABundle is the PEM bundle the agent trusts for the manager: ca alone in strict mode, ca and
// the system store in system-store mode. An empty ca leaves Go's default (the system store).
func CABundle(ca, mode string) string {
	if ca == "" || mode == TLSStrict {
		return ca
	}
	files := systemBundles
	if f := os.Getenv("SSL_CERT_FILE"); f != "" {
		files = append([]string{f}, files...)
	}
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil && len(data) > 0 {
			return strings.TrimRight(ca, "\n") + "\n" + string(data)
		}
	}
	return ca
}

// caBundles holds caData's bundles by mode and CA.
var caBundles sync.Map

// caData is CABundle as the bytes of a client configuration, read once per CA and mode and then
// shared: a client configuration keeps its CA data for as long as its clients live, and in
// system-store mode that is the whole system store (about 200 KiB), which a process playing
// thousands of agents (benchmarks/sim) would otherwise hold once per agent. The bytes are
// never modified (client-go only reads them).
func caData(ca, mode string) []byte {
	key := mode + "\x00" + ca
	if b, ok := caBundles.Load(key); ok {
		return b.([]byte)
	}
	b, _ := caBundles.LoadOrStore(key, []byte(CABundle(ca, mode)))
	return b.([]byte)
}
