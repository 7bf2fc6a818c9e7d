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

// --shard-node-selector takes a shard's nodeSelector as JSON, as Fleet's chart passes it.
func TestShardNodeSelectorFlag(t *testing.T) {
	c := newController()
	if err := c.Flags().Parse([]string{`--shard-node-selector={"zone":"east","kubernetes.io/os":"linux"}`}); err != nil {
		t.Fatal(err)
	}
	got := c.Flags().Lookup("shard-node-selector").Value.String()
	if got != `{"kubernetes.io/os":"linux","zone":"east"}` {
		t.Errorf("parsed %s", got)
	}
	err := c.Flags().Parse([]string{"--shard-node-selector=zone=east"})
	if err == nil || !strings.Contains(err.Error(), "JSON object of strings") {
		t.Errorf("a non-JSON value: %v", err)
	}
}
