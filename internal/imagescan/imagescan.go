// Package imagescan is the logic of ImageScans: picking the newest tag of an image repository by
// a semver range or alphabetically, and rewriting the fields of a repository's files that are
// marked with a scan's tag name.
package imagescan

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Latest picks the newest of tags: the highest semantic version within policy.semver.range, or
// the last in alphabetical order (policy.alphabetical.order "asc", the default) or the first
// ("desc"). With no policy the semver range is "*" (any release). The error says why none fits.
func Latest(tags []string, policy fleet.ImageScanPolicy) (string, error) {
	if a := policy.Alphabetical; a != nil {
		if len(tags) == 0 {
			return "", fmt.Errorf("the repository has no tags")
		}
		sorted := slices.Clone(tags)
		slices.Sort(sorted)
		switch strings.ToLower(a.Order) {
		case "", "asc":
			return sorted[len(sorted)-1], nil
		case "desc":
			return sorted[0], nil
		default:
			return "", fmt.Errorf("spec.policy.alphabetical.order %q: must be asc or desc", a.Order)
		}
	}
	rng := "*"
	if policy.SemVer != nil && strings.TrimSpace(policy.SemVer.Range) != "" {
		rng = policy.SemVer.Range
	}
	c, err := semver.NewConstraint(rng)
	if err != nil {
		return "", fmt.Errorf("spec.policy.semver.range %q: %v", rng, err)
	}
	var best *semver.Version
	bestTag := ""
	for _, t := range tags {
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best, bestTag = v, t
		}
	}
	if best == nil {
		return "", fmt.Errorf("no tag of %d matches the semver range %q", len(tags), rng)
	}
	return bestTag, nil
}

// markerFormat matches a YAML scalar followed by the marker comment of one tag name:
// `# {"$imagescan": "NAME"}` (the value becomes image:tag), `"NAME:tag"` (the tag) or
// `"NAME:name"` (the image without its tag).
const markerFormat = `(?m)^(\s*(?:-\s+)?[^\s#:][^#\n]*?:\s+|\s*-\s+)("?)([^"#\s]+)("?)(\s*#\s*\{\s*"\$imagescan"\s*:\s*"%s(:tag|:name)?"\s*\})`

// Rewrite sets every value of content marked with tagName to the image, tag or both, and reports
// whether anything changed.
func Rewrite(content []byte, tagName, image, tag string) ([]byte, bool) {
	re := regexp.MustCompile(fmt.Sprintf(markerFormat, regexp.QuoteMeta(tagName)))
	changed := false
	out := re.ReplaceAllFunc(content, func(m []byte) []byte {
		g := re.FindSubmatch(m)
		value := image + ":" + tag
		switch string(g[6]) {
		case ":tag":
			value = tag
		case ":name":
			value = image
		}
		if string(g[3]) != value {
			changed = true
		}
		return []byte(string(g[1]) + string(g[2]) + value + string(g[4]) + string(g[5]))
	})
	return out, changed
}
