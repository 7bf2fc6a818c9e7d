// Package logfields names the fields log lines use for what they are about, the same in the
// manager, the agent and the CLI, so `jq 'select(.cluster == "c1")'` over the JSON logs
// (--log-json) finds every line about one thing.
package logfields

import "github.com/sirupsen/logrus"

// The keys.
const (
	// Controller is the controller (or agent handler) writing the line.
	Controller = "controller"
	// Namespace and Object are the namespace and name of the object the line is about.
	Namespace = "namespace"
	Object    = "object"
	// Cluster is the Cluster the line concerns (its name), Commit a git commit.
	Cluster = "cluster"
	Commit  = "commit"
)

// For are the fields of controller's lines about the object ns/name.
func For(controller, ns, name string) logrus.Fields {
	return logrus.Fields{Controller: controller, Namespace: ns, Object: name}
}
