// Package cmd builds the cobra command tree of the single `fleet` binary. Each subcommand lives
// in its own file and only binds flags; the work is done in other packages.
package cmd

import (
	"github.com/spf13/cobra"
)

// ExitCode is an error that asks for a particular exit status (Err, when set, is printed).
type ExitCode struct {
	Code int
	Err  error
}

func (e *ExitCode) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return ""
}

func (e *ExitCode) Unwrap() error { return e.Err }

// New returns the root command with every subcommand attached.
func New() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleet",
		Short:         "GitOps continuous delivery for many Kubernetes clusters",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersion(), newApply(), newTarget(), newTest(), newController(), newAgent(), newInstall(), newGitCloner(), newStatus(), newDump(), newCleanup(), newDeploy(), newBundleDiff(), newMonitor(), newAnalyze(), newMigrate(), newRollout(), newHistory(), newRollback(), newPlan(), newUI(), newNotify())
	return root
}
