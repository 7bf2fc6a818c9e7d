package clusterimport

import (
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
	return clientcmd.NewDefaultClientConfig(*only, &clientcmd.ConfigOverrides{}).ClientConfig()
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
