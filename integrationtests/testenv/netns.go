package testenv

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

func port(c *localcluster.Cluster) string { return c.Server[strings.LastIndex(c.Server, ":")+1:] }

// Unreachable returns an error when the apiserver of c, which runs in ns, answers a connection
// from the host at either address the host might try.
func Unreachable(c *localcluster.Cluster, ns *localcluster.NetNS) error {
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, addr := range []string{"127.0.0.1", ns.NSIP.String()} {
		if _, err := insecure.Get("https://" + net.JoinHostPort(addr, port(c)) + "/readyz"); err == nil {
			return fmt.Errorf("the apiserver of %s answers at %s from the host", c.Name, addr)
		}
	}
	return nil
}

// HostURL is where what runs inside ns reaches the apiserver of c, which runs on the host and
// listens on every address.
func HostURL(c *localcluster.Cluster, ns *localcluster.NetNS) string {
	return "https://" + net.JoinHostPort(ns.HostIP.String(), port(c))
}
