package registration

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// TokenOf names the ClusterRegistrationToken whose import identity requester (a
// RequesterAnnotation) is, among tokens; nil when it is none of them.
func TokenOf(requester, namespace string, tokens []*fleet.ClusterRegistrationToken) *fleet.ClusterRegistrationToken {
	sa, ok := strings.CutPrefix(requester, "system:serviceaccount:"+namespace+":")
	if !ok {
		return nil
	}
	for _, t := range tokens {
		if t.Namespace == namespace && ImportServiceAccount(t.Name) == sa {
			return t
		}
	}
	return nil
}

// TokenLabels are the labels a token restricts its Clusters to (ClusterLabelsAnnotation), and
// whether it restricts them.
func TokenLabels(t *fleet.ClusterRegistrationToken) (map[string]string, bool, error) {
	v, ok := t.Annotations[ClusterLabelsAnnotation]
	if !ok {
		return nil, false, nil
	}
	labels := map[string]string{}
	if err := json.Unmarshal([]byte(v), &labels); err != nil {
		return nil, true, fmt.Errorf("clusterregistrationtoken %s/%s, annotation %s: %w", t.Namespace, t.Name, ClusterLabelsAnnotation, err)
	}
	return labels, true, nil
}

// TokenLabelKeys are the label keys whose values a restricting token lets the agent choose
// (ClusterLabelKeysAnnotation).
func TokenLabelKeys(t *fleet.ClusterRegistrationToken) map[string]bool {
	keys := map[string]bool{}
	for _, k := range strings.Split(t.Annotations[ClusterLabelKeysAnnotation], ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys[k] = true
		}
	}
	return keys
}

// RegisteredLabels are the labels a Cluster created by a registration gets: the agent's
// (sanitized), unless the token it came with restricts them. Then the Cluster gets the token's
// labels and, of the agent's, only those of the keys the token lists that put it in no
// ClusterGroup of the namespace (groups) beyond the ones the token's labels alone select: an
// agent can neither move its Cluster into groups its token did not allow nor give it a label a
// clusterSelector could pick it by. A registration whose token is not known (no
// RequesterAnnotation, as from a Fleet agent, or a token since deleted) gets no labels of the
// agent's when any token of its namespace restricts labels: otherwise leaving the annotation out
// would be a way around the restriction. The message says what was dropped.
func RegisteredLabels(reg *fleet.ClusterRegistration, tokens []*fleet.ClusterRegistrationToken, groups []*fleet.ClusterGroup) (map[string]string, string) {
	asked := SanitizeLabels(reg.Spec.ClusterLabels)
	if tok := TokenOf(reg.Annotations[RequesterAnnotation], reg.Namespace, tokens); tok != nil {
		allowed, restricted, err := TokenLabels(tok)
		switch {
		case err != nil:
			return nil, err.Error() + ": the agent's labels are dropped"
		case restricted:
			return restrictedLabels(SanitizeLabels(allowed), TokenLabelKeys(tok), asked, groups)
		}
		return asked, ""
	}
	for _, t := range tokens {
		if _, restricted := t.Annotations[ClusterLabelsAnnotation]; restricted && t.Namespace == reg.Namespace {
			labels, msg := restrictedLabels(map[string]string{}, nil, asked, groups)
			if msg != "" {
				msg = fmt.Sprintf("the registration names no registration token of namespace %s, where token %s restricts labels: %s", reg.Namespace, t.Name, msg)
			}
			return labels, msg
		}
	}
	return asked, ""
}

// restrictedLabels are a restricting token's labels (base) and, of the agent's (asked), those of
// the keys it lists that join no group beyond base's; the message names the labels left out.
func restrictedLabels(base map[string]string, keys map[string]bool, asked map[string]string, groups []*fleet.ClusterGroup) (map[string]string, string) {
	chosen := map[string]string{}
	var dropped []string
	for _, k := range slices.Sorted(maps.Keys(asked)) {
		if _, ok := base[k]; ok {
			continue // the token's value stands
		}
		if !keys[k] {
			dropped = append(dropped, fmt.Sprintf("%s=%s (key not listed by the token)", k, asked[k]))
			continue
		}
		chosen[k] = asked[k]
	}
	out, msg := withinGroups(base, chosen, groups)
	if len(dropped) == 0 {
		return out, msg
	}
	if msg == "" {
		return out, "labels the registration token does not allow dropped: " + strings.Join(dropped, ", ")
	}
	return out, msg + ", " + strings.Join(dropped, ", ")
}

// withinGroups adds to base those of asked (in key order) that make the labels match no
// ClusterGroup beyond the ones base matches; the message names the labels left out.
func withinGroups(base, asked map[string]string, groups []*fleet.ClusterGroup) (map[string]string, string) {
	out := maps.Clone(base)
	allowed := matching(out, groups)
	var dropped []string
	for _, k := range slices.Sorted(maps.Keys(asked)) {
		if _, ok := base[k]; ok {
			continue // the token's value stands
		}
		out[k] = asked[k]
		for g := range matching(out, groups) {
			if !allowed[g] {
				delete(out, k)
				dropped = append(dropped, fmt.Sprintf("%s=%s (cluster group %s)", k, asked[k], g))
				break
			}
		}
	}
	if len(dropped) == 0 {
		return out, ""
	}
	return out, "labels the registration token does not allow dropped: " + strings.Join(dropped, ", ")
}

// matching are the names of the groups whose selector selects labels.
func matching(labels map[string]string, groups []*fleet.ClusterGroup) map[string]bool {
	out := map[string]bool{}
	for _, g := range groups {
		if g.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(g.Spec.Selector)
		if err == nil && sel.Matches(k8slabels.Set(labels)) {
			out[g.Name] = true
		}
	}
	return out
}
