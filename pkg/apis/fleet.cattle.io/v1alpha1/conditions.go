package v1alpha1

import (
	"slices"
	"time"

	"github.com/rancher/wrangler/v3/pkg/condition"
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
)

// Condition types. Each is a wrangler condition.Cond, so handlers can set them on any object
// with status.conditions (SetStatus, SetError, IsTrue, ...).
const (
	// ConditionReady is True when the object and everything it rolls up is ready; when False its
	// message names the first non-ready clusters and resources. Used by every kind with status.
	ConditionReady condition.Cond = "Ready"
	// ConditionAccepted is True when a GitRepo passed its namespace's restrictions; False with
	// the violated rule otherwise.
	ConditionAccepted condition.Cond = "Accepted"
	// ConditionGitPolling is True when the last poll of the remote succeeded; False with the
	// error (unreachable repository, bad credentials).
	ConditionGitPolling condition.Cond = "GitPolling"
	// ConditionReconciling is True while a GitRepo's clone-and-apply run is in progress.
	ConditionReconciling condition.Cond = "Reconciling"
	// ConditionStalled is True when a GitRepo's run failed and will not progress without a
	// change; its message carries the failure.
	ConditionStalled condition.Cond = "Stalled"
	// ConditionProcessed is True when the manager turned a Bundle or Cluster into its children
	// (BundleDeployments, namespaces) without error.
	ConditionProcessed condition.Cond = "Processed"
	// ConditionDeployed is True when the agent deployed the BundleDeployment's current
	// deploymentID; False with the error when a (retriable) deploy failed.
	ConditionDeployed condition.Cond = "Deployed"
	// ConditionInstalled is False when Helm rejected the release for a reason retrying cannot
	// fix (invalid manifest, immutable field); True after a successful install.
	ConditionInstalled condition.Cond = "Installed"
	// ConditionMonitored is True when the agent checked the deployed resources' readiness and
	// drift; False when it could not.
	ConditionMonitored condition.Cond = "Monitored"
	// ConditionImported is True when a Cluster's agent registered.
	ConditionImported condition.Cond = "Imported"
)

// ReasonValuesSecretMissing is the reason of a False Deployed condition whose deployment's
// options Secret (spec.valuesHash) is not there (ours): the manager writes it again when it
// can make exactly those values.
const ReasonValuesSecretMissing = "ValuesSecretMissing"

// FindCondition returns the condition of the given type, or nil.
func FindCondition(conds []genericcondition.GenericCondition, t condition.Cond) *genericcondition.GenericCondition {
	for i := range conds {
		if conds[i].Type == string(t) {
			return &conds[i]
		}
	}
	return nil
}

// RemoveCondition removes the condition of the given type; it reports whether there was one.
func RemoveCondition(conds *[]genericcondition.GenericCondition, t condition.Cond) bool {
	n := len(*conds)
	*conds = slices.DeleteFunc(*conds, func(c genericcondition.GenericCondition) bool { return c.Type == string(t) })
	return len(*conds) != n
}

// SetCondition sets a condition and reports whether anything changed, so callers can skip a
// status write when nothing did. lastTransitionTime moves only when the status changes;
// lastUpdateTime moves on any change.
func SetCondition(conds *[]genericcondition.GenericCondition, t condition.Cond, status corev1.ConditionStatus, reason, message string, now time.Time) bool {
	ts := now.UTC().Format(time.RFC3339)
	c := FindCondition(*conds, t)
	if c == nil {
		*conds = append(*conds, genericcondition.GenericCondition{
			Type: string(t), Status: status, Reason: reason, Message: message,
			LastUpdateTime: ts, LastTransitionTime: ts,
		})
		return true
	}
	if c.Status == status && c.Reason == reason && c.Message == message {
		return false
	}
	if c.Status != status {
		c.LastTransitionTime = ts
	}
	c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, message, ts
	return true
}
