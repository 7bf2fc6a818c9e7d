package cmd

import (
	"strings"
	"testing"
)

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
