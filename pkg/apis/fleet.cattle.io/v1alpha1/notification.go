package v1alpha1

import (
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Notifications are this implementation's own (Fleet has none): two kinds of their own, which
// Fleet's tools and the Rancher UI ignore. An AlertProvider says where messages go; an Alert
// says which GitRepos, HelmOps and Bundles of its namespace it reports on, which events, and
// through which provider. The manager sends one message per source and transition (a rollout
// stage halting, a GitRepo that cannot clone), never one per cluster, and sets commit statuses
// on the forge.

// AlertProvider types.
const (
	// ProviderSlack posts to a Slack incoming webhook (the address).
	ProviderSlack = "slack"
	// ProviderMSTeams posts to a Microsoft Teams incoming webhook (the address).
	ProviderMSTeams = "msteams"
	// ProviderWebhook posts the message as JSON to the address, signed with HMAC-SHA256 of the
	// Secret's hmacKey (header X-Fleet-Signature: sha256=<hex>).
	ProviderWebhook = "webhook"
	// ProviderGitHub sets commit statuses through GitHub's API (the address: its base URL,
	// default https://api.github.com/) with the Secret's token.
	ProviderGitHub = "github"
	// ProviderGitLab sets commit statuses through GitLab's API (the address: its base URL,
	// default https://gitlab.com/api/v4/) with the Secret's token.
	ProviderGitLab = "gitlab"
)

// Defaults of an Alert.
const (
	DefaultNotReadyAfter = 10 * time.Minute
	DefaultDigestWindow  = 10 * time.Minute
)

// Alert event severities.
const (
	SeverityInfo  = "info"
	SeverityError = "error"
)

// ConditionDelivered is an Alert's condition: True when its last message was delivered, False
// naming the field and the reason when it cannot be (an unknown provider, a missing Secret, a
// refusing endpoint).
const ConditionDelivered = "Delivered"

// NotifyTestAnnotation on an Alert asks the manager for a test message through its provider
// (`fleet notify test`): its value, any new one, names the request; the Alert's status.sent
// records it as source "Alert/<name>#test", key "test/<value>", once delivered.
const NotifyTestAnnotation = "fleetgo.io/notify-test"

// UseNotifications is the use of a Secret (annotation fleet.cattle.io/allowed-uses) that an
// AlertProvider names.
const UseNotifications = "notifications"

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet,path=alertproviders
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`

// AlertProvider is where an Alert's messages go, and with which Secret.
type AlertProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AlertProviderSpec `json:"spec,omitempty"`
}

// AlertProviderSpec is an AlertProvider's content.
type AlertProviderSpec struct {
	// Type is slack, msteams, webhook, github or gitlab.
	// +kubebuilder:validation:Enum=slack;msteams;webhook;github;gitlab
	Type string `json:"type"`
	// Address is where messages go: the incoming webhook's URL (slack, msteams, webhook), or
	// the forge API's base URL (github, gitlab; empty: the public one). The Secret's "address"
	// key, when set, wins: a webhook's URL is a credential.
	Address string `json:"address,omitempty"`
	// SecretName names a Secret of the namespace holding "address", "token" (github, gitlab)
	// or "hmacKey" (webhook). It is used only while annotated fleet.cattle.io/allowed-uses:
	// notifications, and its writer must be able to read it.
	SecretName string `json:"secretName,omitempty"`
	// Channel overrides the Slack webhook's channel.
	Channel string `json:"channel,omitempty"`
	// UIURL is the base URL of the fleet UI; messages link to its pages.
	UIURL string `json:"uiURL,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet,path=alerts
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef`
// +kubebuilder:printcolumn:name="Last-Sent",type=date,JSONPath=`.status.lastSent`

// Alert reports what changes do to the GitRepos, HelmOps and Bundles of its namespace it names:
// one message per source and transition, through its provider.
type Alert struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AlertSpec   `json:"spec,omitempty"`
	Status AlertStatus `json:"status,omitempty"`
}

// AlertSpec is an Alert's content.
type AlertSpec struct {
	// ProviderRef names the AlertProvider of the namespace that sends the messages.
	ProviderRef string `json:"providerRef"`
	// Sources are what the Alert reports on.
	Sources []AlertSource `json:"sources"`
	// EventSeverity is the least severity sent: info (every transition, the default) or error
	// (failures only: a halt, a rollback, a GitRepo that cannot clone or apply).
	// +kubebuilder:validation:Enum=info;error;""
	EventSeverity string `json:"eventSeverity,omitempty"`
	// Events, when set, are the only event reasons sent (as the messages name them: Started,
	// Soaking, WaitingForApproval, Paused, Halted, RolledBack, Aborted, Complete, Invalid,
	// Failed, Recovered, Drifted, DriftCorrected, NotReady, Ready, Offline, Online).
	// +nullable
	Events []string `json:"events,omitempty"`
	// NotReadyAfter is how long a source's clusters may stay not ready (after a change, or
	// at any time) before a NotReady message is sent (default 10m).
	// +nullable
	NotReadyAfter *metav1.Duration `json:"notReadyAfter,omitempty"`
	// DigestWindow folds repeats: a message of a reason the Alert sent for the same source less
	// than this long ago is held, and what was held goes out as one digest when the window
	// ends (default 10m; 0s: nothing is folded). Rollout transitions and commit checks are
	// never folded.
	// +nullable
	DigestWindow *metav1.Duration `json:"digestWindow,omitempty"`
	// Suspend stops sending. What happens meanwhile is not sent later, but where each source
	// stands when sending resumes is, when that differs from what was sent last.
	Suspend bool `json:"suspend,omitempty"`
}

// AlertSource names GitRepos, HelmOps, Bundles or Clusters of the Alert's namespace: one by
// name, or those carrying MatchLabels ("*" or an empty name with no labels: all of the kind).
// Clusters are reported on together: which of them went offline, and when all are back.
type AlertSource struct {
	// Kind is GitRepo, HelmOp, Bundle or Cluster.
	// +kubebuilder:validation:Enum=GitRepo;HelmOp;Bundle;Cluster
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
	// +nullable
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// AlertStatus is what the Alert last sent.
type AlertStatus struct {
	// Conditions: Delivered.
	Conditions []genericcondition.GenericCondition `json:"conditions,omitempty"`
	// Sent holds, per source, the key of the last message delivered for it: a message whose
	// key is here is not sent again, after a restart too.
	// +nullable
	Sent []AlertSent `json:"sent,omitempty"`
	// LastSent is when the last message was delivered, LastMessage its summary line.
	// +nullable
	LastSent    *metav1.Time `json:"lastSent,omitempty"`
	LastMessage string       `json:"lastMessage,omitempty"`
	// LastError is why the last delivery failed (no credential in it).
	LastError string `json:"lastError,omitempty"`
}

// AlertSent is the last message delivered for a source ("Kind/name").
type AlertSent struct {
	Source string `json:"source"`
	Key    string `json:"key"`
	// Reason is the message's reason (Halted, Drifted, ...).
	Reason string `json:"reason,omitempty"`
	// At is when it was delivered (empty: it was the source's state when the Alert came).
	// +nullable
	At *metav1.Time `json:"at,omitempty"`
}
