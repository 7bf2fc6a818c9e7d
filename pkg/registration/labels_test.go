package registration

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestRegisteredLabels(t *testing.T) {
	open := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "open"}}
	prod := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "prod",
		Annotations: map[string]string{ClusterLabelsAnnotation: `{"env":"prod"}`}}}
	other := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "edge",
		Annotations: map[string]string{ClusterLabelsAnnotation: `{"env":"edge"}`}}}
	asks := map[string]string{"env": "dev", "team": "a", "fleet.cattle.io/x": "y"}
	reg := func(requester string) *fleet.ClusterRegistration {
		r := &fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "request-1"},
			Spec: fleet.ClusterRegistrationSpec{ClusterLabels: asks}}
		if requester != "" {
			r.Annotations = map[string]string{RequesterAnnotation: requester}
		}
		return r
	}
	sa := func(ns, token string) string {
		return "system:serviceaccount:" + ns + ":" + ImportServiceAccount(token)
	}
	for _, tc := range []struct {
		name   string
		reg    *fleet.ClusterRegistration
		tokens []*fleet.ClusterRegistrationToken
		want   map[string]string
		msg    string
	}{
		{name: "open token: the agent's labels, sanitized", reg: reg(sa("fleet-default", "open")), tokens: []*fleet.ClusterRegistrationToken{open, prod},
			want: map[string]string{"env": "dev", "team": "a"}},
		{name: "restricted token: exactly its labels", reg: reg(sa("fleet-default", "prod")), tokens: []*fleet.ClusterRegistrationToken{open, prod},
			want: map[string]string{"env": "prod"}},
		{name: "unknown token where one restricts: none", reg: reg(""), tokens: []*fleet.ClusterRegistrationToken{open, prod},
			want: nil, msg: "token prod restricts labels"},
		{name: "another namespace's token is not this namespace's", reg: reg(sa("other", "edge")), tokens: []*fleet.ClusterRegistrationToken{open, prod, other},
			want: nil, msg: "restricts labels"},
		{name: "unknown token, nothing restricted: the agent's labels", reg: reg(""), tokens: []*fleet.ClusterRegistrationToken{open, other},
			want: map[string]string{"env": "dev", "team": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := RegisteredLabels(tc.reg, tc.tokens)
			if len(got) == 0 && len(tc.want) == 0 {
				got, tc.want = nil, nil
			}
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(msg, tc.msg) || (tc.msg == "" && msg != "") {
				t.Errorf("got %v %q, want %v %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}
