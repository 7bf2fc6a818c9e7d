package helmdeployer

import (
	"strings"

	"github.com/fleetgo/fleet/internal/helmrelease"
)

// A permanent error (helmrelease.Permanent) is a deploy failure only the user can fix:
// retrying the same input fails the same way, so it is reported, not retried in a loop.

// Helm reports these as plain strings: rendering and validation failures, kinds the cluster
// does not serve, and updates the apiserver refuses for good.
var permanentHelmErrors = []string{
	"parse error",
	"template: ",
	"execution error",
	"unable to build kubernetes objects",
	"no matches for kind",
	"resource mapping not found",
	"field is immutable",
	"is invalid",
	"values don't meet the specifications of the schema",
	"error validating data",
	"cannot patch",
	"wrong type for value",
	"error converting YAML to JSON",
	"chart requires kubeVersion",
	"invalid ownership metadata",
	"exists and cannot be imported",
	"cannot unmarshal",
	"cannot be handled as",
}

// classify marks Helm errors that retrying cannot fix as permanent.
func classify(err error) error {
	msg := err.Error()
	for _, s := range permanentHelmErrors {
		if strings.Contains(msg, s) {
			return helmrelease.Permanent(err)
		}
	}
	return err
}

func isUnknownKind(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no matches for kind") || strings.Contains(msg, "resource mapping not found")
}
