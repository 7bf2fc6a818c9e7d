package secretuse

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	corev1 "k8s.io/api/core/v1"
)

// GitHostsAnnotation on a Secret of git credentials lists (comma-separated) the hosts they are
// for: "github.com" for any port of that host, "git.example:8443" for one port. A namespace's
// default credentials (Secret gitcredential, used by a GitRepo naming no clientSecretName) go
// only to a host it lists: whoever may write GitRepos there, even one who may not read that
// Secret, picks spec.repo.
const GitHostsAnnotation = "fleet.cattle.io/git-hosts"

// GitHosts says where the git credentials in s may go, for the repository at repoURL:
// annotated says whether s lists its hosts at all, listed whether repoURL's host is one of them.
func GitHosts(s *corev1.Secret, repoURL string) (annotated, listed bool, err error) {
	v, annotated := s.Annotations[GitHostsAnnotation]
	if !annotated {
		return false, false, nil
	}
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return true, false, fmt.Errorf("repository %q: %w", repoURL, err)
	}
	host := strings.ToLower(ep.Host)
	port := fmt.Sprint(ep.Port)
	if ep.Port == 0 {
		// The protocol's own: "git.example:443" lists https://git.example/ too.
		port = fmt.Sprint(map[string]int{"http": 80, "https": 443, "ssh": 22, "git": 9418}[strings.ToLower(ep.Protocol)])
	}
	for _, h := range strings.Split(v, ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		name, p, hasPort := strings.Cut(h, ":")
		if name == host && (!hasPort || p == port) {
			return true, true, nil
		}
	}
	return true, false, nil
}
