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
	north := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "north",
		Annotations: map[string]string{ClusterLabelsAnnotation: `{"region":"north"}`}}}
	northTeams := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "north-teams",
		Annotations: map[string]string{ClusterLabelsAnnotation: `{"region":"north"}`, ClusterLabelKeysAnnotation: "team, env"}}}
	other := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "edge",
		Annotations: map[string]string{ClusterLabelsAnnotation: `{"region":"edge"}`}}}
	group := func(name string, sel map[string]string) *fleet.ClusterGroup {
		return &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
	}
	groups := []*fleet.ClusterGroup{group("north", map[string]string{"region": "north"}), group("prod", map[string]string{"env": "prod"}),
		group("everything", map[string]string{})}
	reg := func(requester string, asks map[string]string) *fleet.ClusterRegistration {
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
	asks := map[string]string{"env": "prod", "team": "a", "region": "south", "fleet.cattle.io/x": "y"}
	for _, tc := range []struct {
		name   string
		reg    *fleet.ClusterRegistration
		tokens []*fleet.ClusterRegistrationToken
		want   map[string]string
		msg    string
	}{
		{name: "open token: the agent's labels, sanitized", reg: reg(sa("fleet-default", "open"), asks), tokens: []*fleet.ClusterRegistrationToken{open, north},
			want: map[string]string{"env": "prod", "team": "a", "region": "south"}},
		{name: "group token: its labels, none of the agent's", reg: reg(sa("fleet-default", "north"), asks),
			tokens: []*fleet.ClusterRegistrationToken{open, north},
			want:   map[string]string{"region": "north"}, msg: "team=a (key not listed by the token)"},
		{name: "group token, a label that joins no group but is not listed", reg: reg(sa("fleet-default", "north"), map[string]string{"env": "edge"}),
			tokens: []*fleet.ClusterRegistrationToken{north}, want: map[string]string{"region": "north"}, msg: "env=edge (key not listed"},
		{name: "group token listing keys: the agent's of those keys that join no other group", reg: reg(sa("fleet-default", "north-teams"), asks),
			tokens: []*fleet.ClusterRegistrationToken{open, northTeams},
			want:   map[string]string{"region": "north", "team": "a"}, msg: "env=prod (cluster group prod)"},
		{name: "group token listing keys, harmless labels", reg: reg(sa("fleet-default", "north-teams"), map[string]string{"env": "edge", "team": "b"}),
			tokens: []*fleet.ClusterRegistrationToken{northTeams}, want: map[string]string{"region": "north", "env": "edge", "team": "b"}},
		{name: "unknown token where one restricts: none of the agent's labels", reg: reg("", asks),
			tokens: []*fleet.ClusterRegistrationToken{open, north},
			want:   map[string]string{}, msg: "token north restricts labels"},
		{name: "another namespace's token is not this namespace's", reg: reg(sa("other", "edge"), asks),
			tokens: []*fleet.ClusterRegistrationToken{open, north, other},
			want:   map[string]string{}, msg: "restricts labels"},
		{name: "unknown token, nothing restricted: the agent's labels", reg: reg("", asks), tokens: []*fleet.ClusterRegistrationToken{open, other},
			want: map[string]string{"env": "prod", "team": "a", "region": "south"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := RegisteredLabels(tc.reg, tc.tokens, groups)
			if !reflect.DeepEqual(got, tc.want) || !strings.Contains(msg, tc.msg) || (tc.msg == "" && msg != "") {
				t.Errorf("got %v %q, want %v %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}

// The registration key's patch records the hash and, only when an allowance was used, removes it.
func TestKeyPatch(t *testing.T) {
	if got := string(KeyPatch("abc", false)); got != `{"metadata":{"annotations":{"fleet.cattle.io/registration-key-hash":"abc"}}}` {
		t.Errorf("without allowance: %s", got)
	}
	if got := string(KeyPatch("abc", true)); got != `{"metadata":{"annotations":{"fleet.cattle.io/allow-reregistration":null,"fleet.cattle.io/registration-key-hash":"abc"}}}` {
		t.Errorf("with allowance: %s", got)
	}
	key, hash, err := NewKey()
	if err != nil || !KeyMatches(key, hash) || KeyMatches(hash, hash) || KeyMatches("", KeyHash("")) {
		t.Errorf("NewKey/KeyMatches: %v", err)
	}
}
