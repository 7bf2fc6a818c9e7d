package gitrepo

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/rancherca"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// lookup returns a Secret from the cache (from the apiserver when the handler has no cache).
func (h *handler) lookup(ns, name string) (*corev1.Secret, error) {
	if h.Secrets != nil {
		return h.Secrets.Cache().Get(ns, name)
	}
	return h.Kube.CoreV1().Secrets(ns).Get(h.context(), name, metav1.GetOptions{})
}

// withRancherCA is gr trusting Rancher's CA bundle (package rancherca) when it names no CA of
// its own (spec.caBundle) and checks certificates, as on Fleet: for its clone and polls, and in
// its Job for the clone and the charts its bundles take from Helm repositories and git.
func (h *handler) withRancherCA(gr *fleet.GitRepo) *fleet.GitRepo {
	if len(gr.Spec.CABundle) > 0 || gr.Spec.InsecureSkipTLSVerify {
		return gr
	}
	ca, err := rancherca.Bundle(h.lookup)
	if err != nil {
		h.log(gr).WithError(err).Warn("trusting the system's CAs only")
	}
	if len(ca) == 0 {
		return gr
	}
	out := gr.DeepCopy()
	out.Spec.CABundle = ca
	return out
}

// secret returns a Secret of the GitRepo's namespace that the GitRepo names, unless the guard
// refuses it.
func (h *handler) secret(ns, name string) (*corev1.Secret, error) {
	s, err := h.lookup(ns, name)
	if err != nil {
		return nil, err
	}
	// A GitRepo names its credentials: none may be a credential of the manager or a cluster.
	if err := h.Guard.Check(s, "GitRepo of namespace "+ns); err != nil {
		return nil, err
	}
	return s, nil
}

// source is the GitRepo's repository with its credentials (clientSecretName), SSH ones with
// the shared known hosts when the secret holds none.
func (h *handler) source(gr *fleet.GitRepo) (gitsource.Source, error) {
	src, err := Source(gr, h.secret)
	if err != nil {
		return src, err
	}
	return src, h.KnownHosts.fill(h.context(), &src.Auth)
}

// Source is the GitRepo's repository with its credentials (clientSecretName, read with
// secret): what the GitRepo controller clones and ImageScans push to.
func Source(gr *fleet.GitRepo, secret func(ns, name string) (*corev1.Secret, error)) (gitsource.Source, error) {
	src := gitsource.Source{URL: gr.Spec.Repo, Branch: gr.Spec.Branch, Revision: gr.Spec.Revision,
		CABundle: gr.Spec.CABundle, InsecureSkipTLSVerify: gr.Spec.InsecureSkipTLSVerify}
	if gr.Spec.Repo == "" {
		return src, fmt.Errorf("spec.repo is empty")
	}
	s, err := clientSecret(gr, secret)
	if err != nil || s == nil {
		return src, err
	}
	src.Auth = gitsource.Auth{Username: string(s.Data[corev1.BasicAuthUsernameKey]), Password: string(s.Data[corev1.BasicAuthPasswordKey]),
		SSHPrivateKey: s.Data[corev1.SSHAuthPrivateKey], KnownHosts: s.Data["known_hosts"]}
	if src.Auth.GitHubApp, err = gitsource.GitHubAppOf(s.Data); err != nil {
		return src, fmt.Errorf("secret %s: %w", s.Name, err)
	}
	return src, nil
}

// DefaultClientSecretName is the Secret a GitRepo naming no clientSecretName clones with when
// its namespace has one (as on Fleet), for the hosts it lists (secretuse.GitHostsAnnotation).
const DefaultClientSecretName = "gitcredential"

// clientSecret is the GitRepo's git credentials (nil for none): its clientSecretName, else the
// namespace's Secret gitcredential when there is one and it lists the repository's host. A
// Secret that lists hosts goes to no other: a named one fails, the default one is left out.
func clientSecret(gr *fleet.GitRepo, secret func(ns, name string) (*corev1.Secret, error)) (*corev1.Secret, error) {
	name, field := gr.Spec.ClientSecretName, "clientSecretName"
	if name == "" {
		name, field = DefaultClientSecretName, "default credentials"
	}
	s, err := secret(gr.Namespace, name)
	if apierrors.IsNotFound(err) && field == "default credentials" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", field, name, err)
	}
	annotated, listed, err := secretuse.GitHosts(s, gr.Spec.Repo)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s %s: %w", field, name, err)
	case listed, !annotated && field == "clientSecretName":
		return s, nil
	case annotated && field == "default credentials":
		return nil, nil // for other hosts: this repository is cloned without credentials
	case annotated:
		return nil, fmt.Errorf("clientSecretName %s: secret %s/%s is for the hosts %q (annotation %s), not for spec.repo %s: it is not sent",
			name, gr.Namespace, name, s.Annotations[secretuse.GitHostsAnnotation], secretuse.GitHostsAnnotation, gr.Spec.Repo)
	}
	return nil, fmt.Errorf("default credentials %s: secret %s/%s lists no hosts (annotation %s): a GitRepo naming no clientSecretName is cloned with it only "+
		"for a host it lists, as anyone who may write GitRepos here picks spec.repo; annotate it (%s: git.example.com) or name it in clientSecretName",
		name, gr.Namespace, name, secretuse.GitHostsAnnotation, secretuse.GitHostsAnnotation)
}
