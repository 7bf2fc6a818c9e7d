// Package names derives Kubernetes-safe names the way Fleet does, so objects keep the names
// users know: Bundle names from a GitRepo and a path, Helm release names, and names joined from
// several parts. Used by `fleet apply` and the manager controllers.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

const (
	// MaxHelmReleaseName is Helm's limit on release names; Bundle names obey it too because a
	// Bundle's name becomes its release's name by default.
	MaxHelmReleaseName = 53
	// MaxDNSLabel is the limit on namespace names and other DNS labels.
	MaxDNSLabel = 63
	// hashLen is how many hex digits of sha256 end a shortened name.
	hashLen = 5
)

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	disallowed   = regexp.MustCompile(`[^a-z0-9.-]+`)
	dashes       = regexp.MustCompile(`-{2,}`)
)

// HelmReleaseName turns s into a valid Helm release name of at most 53 characters: lower case,
// runs of other characters replaced by "-", and when too long, shortened with a hash suffix of
// the whole input so distinct inputs stay distinct.
func HelmReleaseName(s string) string {
	if len(s) <= MaxHelmReleaseName && dnsSubdomain.MatchString(s) {
		return s
	}
	clean := disallowed.ReplaceAllString(strings.ToLower(s), "-")
	clean = dashes.ReplaceAllString(clean, "-")
	clean = strings.Trim(clean, "-.")
	return Limit(clean, MaxHelmReleaseName, s)
}

// BundleName is the name of the Bundle `fleet apply` makes for the folder path of a GitRepo
// (or of the NAME given to fleet apply): the name and the path joined by dashes, as a Helm
// release name. The root folder ("", ".", "/") gives the name alone.
func BundleName(repo, path string) string {
	path = strings.Trim(strings.TrimPrefix(path, "./"), "/")
	if path == "" || path == "." {
		return HelmReleaseName(repo)
	}
	return HelmReleaseName(repo + "-" + strings.ReplaceAll(path, "/", "-"))
}

// SafeConcatName joins parts with "-" into a DNS label of at most 63 characters, shortening
// with a hash suffix when needed.
func SafeConcatName(parts ...string) string {
	joined := strings.Join(parts, "-")
	clean := strings.Trim(dashes.ReplaceAllString(disallowed.ReplaceAllString(strings.ToLower(joined), "-"), "-"), "-")
	clean = strings.ReplaceAll(clean, ".", "-")
	return Limit(clean, MaxDNSLabel, joined)
}

// Limit returns s when it fits in max characters; otherwise its first characters, a dash and a
// short hash of key, max characters in all.
func Limit(s string, max int, key string) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(key))
	prefix := strings.TrimRight(s[:max-hashLen-1], "-.")
	return prefix + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// ClusterNamespace is the namespace on the manager that holds a Cluster's BundleDeployments:
// "cluster-", the Cluster's namespace and name, and a hash of both so that distinct clusters
// never share one even when shortened.
func ClusterNamespace(clusterNamespace, clusterName string) string {
	sum := sha256.Sum256([]byte(clusterNamespace + "/" + clusterName))
	h := hex.EncodeToString(sum[:])[:8]
	return SafeConcatName("cluster", clusterNamespace, clusterName, h)
}
