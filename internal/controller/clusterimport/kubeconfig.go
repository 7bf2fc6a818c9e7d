package clusterimport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetgo/fleet/internal/netguard"
)

// inlineRESTConfig is the client configuration of a kubeconfig a tenant wrote, accepted only when
// everything it authenticates with is inline: a token, client certificate and key data, CA data,
// a user name and password. The manager reads that kubeconfig with its own identity, so a
// credential plugin (exec, auth provider) would run a command or code inside the manager, and a
// file path (tokenFile, client certificate or key, certificate authority) would make the manager
// read its own files, its service-account token among them, and send them to the kubeconfig's
// server. Those are refused, naming the entry and the field.
func inlineRESTConfig(data []byte) (*rest.Config, error) {
	kc, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	name := kc.CurrentContext
	if name == "" {
		return nil, fmt.Errorf("no current-context")
	}
	kctx, ok := kc.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("current-context %q: no such context", name)
	}
	var refused []string
	if a, ok := kc.AuthInfos[kctx.AuthInfo]; ok {
		refused = append(refused, refusedAuth(kctx.AuthInfo, a)...)
	}
	if c, ok := kc.Clusters[kctx.Cluster]; ok && c.CertificateAuthority != "" {
		refused = append(refused, fmt.Sprintf("clusters[%s].certificate-authority (a file path; use certificate-authority-data)", kctx.Cluster))
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("the manager accepts only inline credentials, refused: %s", strings.Join(refused, ", "))
	}
	if c, ok := kc.Clusters[kctx.Cluster]; ok {
		if u, err := url.Parse(c.Server); err == nil {
			if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil && netguard.Unreachable(ip) {
				return nil, fmt.Errorf("clusters[%s].server %s: a link-local, unspecified or multicast address (a cloud metadata service, the manager's node) is refused", kctx.Cluster, c.Server)
			}
		}
	}
	// Only the entries the current context names reach the client configuration.
	only := clientcmdapi.NewConfig()
	only.CurrentContext = name
	only.Contexts[name] = kctx
	if a, ok := kc.AuthInfos[kctx.AuthInfo]; ok {
		only.AuthInfos[kctx.AuthInfo] = a
	}
	if c, ok := kc.Clusters[kctx.Cluster]; ok {
		only.Clusters[kctx.Cluster] = c
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*only, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	// A name may resolve to such an address too: the address dialled is checked as well.
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.Refuse(netguard.Unreachable, errUnreachable)}
	cfg.Dial = dialer.DialContext
	return cfg, nil
}

// errUnreachable refuses a connection to an address netguard.Unreachable names.
var errUnreachable = errors.New("a link-local, unspecified or multicast address is refused")

// importMessage is what the Imported condition says of a failed import. What the imported
// cluster's apiserver answered is the tenant's server's text: of it only the status code and
// reason are kept, so no response body (a metadata service's credentials) reaches the status.
func importMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return fmt.Sprintf("installing the agent: the cluster's apiserver answered %d %s", s.Code, s.Reason)
	}
	return err.Error()
}

// refusedAuth names the fields of a kubeconfig user that are not inline credentials.
func refusedAuth(name string, a *clientcmdapi.AuthInfo) []string {
	var refused []string
	field := func(f, why string) { refused = append(refused, fmt.Sprintf("users[%s].%s (%s)", name, f, why)) }
	if a.Exec != nil {
		field("exec", "runs a command")
	}
	if a.AuthProvider != nil {
		field("auth-provider", "a credential plugin")
	}
	if a.TokenFile != "" {
		field("tokenFile", "a file path; use token")
	}
	if a.ClientCertificate != "" {
		field("client-certificate", "a file path; use client-certificate-data")
	}
	if a.ClientKey != "" {
		field("client-key", "a file path; use client-key-data")
	}
	return refused
}
