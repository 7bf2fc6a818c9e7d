// Package helmrelease holds what deciding about a Helm release needs and nothing that talks to a
// cluster: the release as the agent knows it, and the mark of an error only a change of the
// bundle can fix. The deployer (internal/helmdeployer) makes both; the decisions
// (internal/bdstatus) read them without reaching a client. (pure)
package helmrelease

import (
	"errors"
	"strconv"

	"helm.sh/helm/v3/pkg/release"
)

// Release identifies a Helm release.
type Release struct {
	Name      string
	Namespace string
	Version   int
	// BundleID is the BundleDeployment the release belongs to.
	BundleID string
	// DeleteNamespace is true when uninstalling deletes the namespace too.
	DeleteNamespace bool
	// Manifest is the rendered manifest of this revision.
	Manifest string
	// DeploymentID and SyncGeneration are what the release was made for.
	DeploymentID   string
	SyncGeneration int64
	// ValuesHash fingerprints the valuesFrom data it was made with.
	ValuesHash string
	// Status is Helm's release status.
	Status release.Status
	// MadeByFleet is true for a revision a Fleet agent made (before moving onto this one): it
	// records no deploymentID, only its BundleDeployment in the chart's annotations.
	MadeByFleet bool
}

// String is the release as Fleet reports it: "namespace/name:revision".
func (r *Release) String() string {
	return r.Namespace + "/" + r.Name + ":" + strconv.Itoa(r.Version)
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as one only a change of the bundle (or of the cluster) can fix.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
