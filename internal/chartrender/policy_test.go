package chartrender

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/releaseutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The CRD chart's admission policy guards every field of a Cluster's status but the agent's
// own: a field added to ClusterStatus without a line in the policy would be one an agent's
// credential could write.
func TestAgentStatusPolicyGuardsEveryManagerField(t *testing.T) {
	manifest, err := Render(charts.CRD, "fleet-crd", "cattle-fleet-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	var policy *admissionv1.ValidatingAdmissionPolicy
	bound := false
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
				t.Fatal(err)
			}
			if p.Name == "fleet-agent-cluster-status" {
				policy = p
			}
		case "ValidatingAdmissionPolicyBinding":
			var b admissionv1.ValidatingAdmissionPolicyBinding
			if err := yaml.UnmarshalStrict([]byte(doc), &b); err != nil {
				t.Fatal(err)
			}
			bound = bound || b.Spec.PolicyName == "fleet-agent-cluster-status" && slices.Contains(b.Spec.ValidationActions, admissionv1.Deny)
		}
	}
	if policy == nil || !bound {
		t.Fatalf("the CRD chart lacks the agent status policy or its Deny binding (policy %v, bound %v)", policy != nil, bound)
	}
	// It binds the identities registration gives agents.
	if len(policy.Spec.MatchConditions) != 1 ||
		!strings.Contains(policy.Spec.MatchConditions[0].Expression, "'system:serviceaccount:"+registration.AgentIdentityNamespace+":'") {
		t.Errorf("the policy's match condition does not name the agent identity namespace %s: %+v", registration.AgentIdentityNamespace, policy.Spec.MatchConditions)
	}
	guarded := map[string]bool{}
	re := regexp.MustCompile(`^object\.\?status\.\?(\w+) == oldObject\.\?status\.\?(\w+)$`)
	ownCluster := false
	for _, v := range policy.Spec.Validations {
		// The one other validation holds each agent to its own Cluster: the one whose identity
		// annotation names it (RBAC lets every agent identity patch the status of the Clusters
		// of a namespace).
		if strings.Contains(v.Expression, "'"+registration.IdentityAnnotation+"'") &&
			strings.Contains(v.Expression, "'system:serviceaccount:"+registration.AgentIdentityNamespace+":'") {
			ownCluster = true
			continue
		}
		m := re.FindStringSubmatch(v.Expression)
		if m == nil || m[1] != m[2] {
			t.Fatalf("unexpected validation %q", v.Expression)
		}
		guarded[m[1]] = true
	}
	if !ownCluster {
		t.Error("no validation holds an agent to the Cluster its identity annotation names")
	}
	st := reflect.TypeOf(fleet.ClusterStatus{})
	for i := range st.NumField() {
		name := strings.Split(st.Field(i).Tag.Get("json"), ",")[0]
		if name == "agent" {
			if guarded[name] {
				t.Error("status.agent is what the agent reports: it must stay writable")
			}
			continue
		}
		if !guarded[name] {
			t.Errorf("status.%s is not guarded by the agent status policy", name)
		}
		delete(guarded, name)
	}
	for name := range guarded {
		t.Errorf("the policy guards status.%s, which ClusterStatus does not have", name)
	}
}
