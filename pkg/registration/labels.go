package registration

import (
	"encoding/json"
	"fmt"
	"strings"

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

// RegisteredLabels are the labels a Cluster created by a registration gets: the agent's
// (sanitized), unless the token it came with restricts them, in which case exactly the token's.
// A registration whose token is not known (no RequesterAnnotation, as from a Fleet agent, or a
// token since deleted) gets the agent's labels only when no token of its namespace restricts
// labels: otherwise leaving the annotation out would be a way around the restriction.
func RegisteredLabels(reg *fleet.ClusterRegistration, tokens []*fleet.ClusterRegistrationToken) (map[string]string, string) {
	if tok := TokenOf(reg.Annotations[RequesterAnnotation], reg.Namespace, tokens); tok != nil {
		labels, restricted, err := TokenLabels(tok)
		switch {
		case err != nil:
			return nil, err.Error() + ": the agent's labels are dropped"
		case restricted:
			return SanitizeLabels(labels), ""
		}
		return SanitizeLabels(reg.Spec.ClusterLabels), ""
	}
	for _, t := range tokens {
		if _, restricted := t.Annotations[ClusterLabelsAnnotation]; restricted && t.Namespace == reg.Namespace {
			return nil, fmt.Sprintf("the registration names no registration token of namespace %s, where token %s restricts labels: the agent's labels are dropped",
				reg.Namespace, t.Name)
		}
	}
	return SanitizeLabels(reg.Spec.ClusterLabels), ""
}
