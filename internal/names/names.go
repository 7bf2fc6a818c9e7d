// Package names derives Kubernetes-safe names the way Fleet does, so objects keep the names
// users know: Bundle names from a GitRepo and a path, Helm release names, and names joined from
// several parts. Used by `fleet apply` and the manager controllers.
package names

import (
	"crypto/md5"
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
	// bundleNameKeep is how much of a too long Bundle name is kept before its hash.
	bundleNameKeep = 47
	// concatKeep is how much of a too long joined name is kept before its hash.
	concatKeep = 57
	// hashedInput is how much of a cluster's namespace and name (or a clientID) is hashed.
	hashedInput = 100
)

var (
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	disallowed   = regexp.MustCompile(`[^a-z0-9.-]+`)
	dashes       = regexp.MustCompile(`-{2,}`)
	// plain is what a Bundle name may hold without a hash of the original being added.
	plain = regexp.MustCompile(`^[a-z0-9-]*$`)
	// notNameChar are the runs a Bundle name turns into a dash.
	notNameChar = regexp.MustCompile(`[^a-z0-9-]+`)
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
// (or of the NAME given to fleet apply): the name and the path joined by dashes, by Fleet's
// rule (FleetBundleName). The root folder ("", ".", "/") gives the name alone.
func BundleName(repo, path string) string {
	path = strings.Trim(strings.TrimPrefix(path, "./"), "/")
	if path == "" || path == "." {
		return FleetBundleName(repo)
	}
	return FleetBundleName(repo + "-" + path)
}

// FleetBundleName derives a Bundle (and default release) name from s as Fleet does, so Bundles
// keep their names when users move over: slashes become dashes; a string with upper case or
// other characters than letters, digits and dashes gets the first 8 hex digits of its MD5
// appended (so "A" and "a" stay apart); then lower case, runs of other characters as one dash,
// no dashes at the ends. Longer than 53 characters, it keeps 47 and appends 5 hex digits of the
// MD5 of the cleaned name. A result Helm would refuse becomes 24 hex digits of the input's MD5.
func FleetBundleName(s string) string {
	n := strings.ReplaceAll(s, "/", "-")
	if !plain.MatchString(n) {
		n += "-" + md5Hex(n)[:8]
	}
	n = notNameChar.ReplaceAllString(strings.ToLower(n), "-")
	n = strings.Trim(dashes.ReplaceAllString(n, "-"), "-")
	if len(n) > MaxHelmReleaseName {
		sum := md5Hex(n)[:hashLen]
		n = n[:bundleNameKeep]
		if !strings.HasSuffix(n, "-") {
			n += "-"
		}
		n += sum
	}
	if !dnsSubdomain.MatchString(n) {
		return md5Hex(s)[:24]
	}
	return n
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // a name, not a secret: Fleet's rule.
	return hex.EncodeToString(sum[:])
}

// SafeConcatName joins parts with "-" as Fleet does; a result of 64 characters or more keeps
// its first 57 and appends a dash and 5 hex digits of the SHA-256 of the whole (56 and 6 when
// the 57th character is not a lower-case letter or digit). The parts are not cleaned: callers
// pass names that are valid already.
func SafeConcatName(parts ...string) string {
	joined := strings.Join(parts, "-")
	if len(joined) <= MaxDNSLabel {
		return joined
	}
	sum := sha256Hex(joined)
	if c := joined[concatKeep-1]; (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
		return joined[:concatKeep] + "-" + sum[:hashLen]
	}
	return joined[:concatKeep-1] + "-" + sum[:hashLen+1]
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Limit returns s when it fits in max characters; otherwise its first characters, a dash and a
// short hash of key, max characters in all.
func Limit(s string, max int, key string) string {
	if len(s) <= max {
		return s
	}
	prefix := strings.TrimRight(s[:max-hashLen-1], "-.")
	return prefix + "-" + sha256Hex(key)[:hashLen]
}

// ClusterNamespace is the namespace on the manager that holds a Cluster's BundleDeployments, by
// Fleet's rule: "cluster-", the Cluster's namespace and name, and 12 hex digits of the SHA-256 of
// "<namespace>::<name>", so distinct clusters never share one even when shortened.
func ClusterNamespace(clusterNamespace, clusterName string) string {
	return SafeConcatName("cluster", clusterNamespace, clusterName, HashPrefix(clusterNamespace+"::"+clusterName, 12))
}

// HashPrefix is the first n hex digits of the SHA-256 of the first 100 characters of s, as
// Fleet hashes cluster namespaces and clientIDs.
func HashPrefix(s string, n int) string {
	if len(s) > hashedInput {
		s = s[:hashedInput]
	}
	return sha256Hex(s)[:n]
}

// DownstreamCopy is the name, in a cluster namespace, of the copy of a downstreamResources
// source for BundleDeployment bd: the manager writes it there, the cluster's agent reads it.
func DownstreamCopy(bd, source string) string {
	return SafeConcatName(bd, "downstream", source)
}
