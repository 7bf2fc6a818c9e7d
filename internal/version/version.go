// Package version holds the build's version, set at link time by the Makefile (-ldflags -X).
// Every process (controller, agent, CLI) reports it.
package version

import (
	"fmt"
	"runtime"
)

// Set with -ldflags "-X github.com/fleetgo/fleet/internal/version.Version=...".
var (
	// Version is the release version, or "dev" for a local build.
	Version = "dev"
	// GitCommit is the commit the binary was built from.
	GitCommit = "unknown"
	// BuildDate is when the binary was built, RFC 3339 in UTC.
	BuildDate = "unknown"
)

// String is the one-line form printed by `fleet version`.
func String() string {
	return fmt.Sprintf("fleet %s (commit %s, built %s, %s %s/%s)", Version, GitCommit, BuildDate, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
