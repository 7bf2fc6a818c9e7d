package cmd

import (
	"bytes"
	"strings"
	"testing"
)

// A lifetime the apiserver cannot issue is refused before anything starts, never replaced.
func TestControllerRefusesShortCredentialLifetime(t *testing.T) {
	for _, lifetime := range []string{"5m", "1s", "-1h"} {
		root := New()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		// No kubeconfig is reachable: the flag must be refused before any connection.
		root.SetArgs([]string{"controller", "--agent-credential-lifetime", lifetime, "--kubeconfig", "/nonexistent"})
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), "--agent-credential-lifetime") || !strings.Contains(err.Error(), "at least 10m0s") {
			t.Errorf("%s: err = %v", lifetime, err)
		}
	}
}
