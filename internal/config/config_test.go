package config

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	c, err := Parse(`{"apiServerURL":"https://m:6443","agentCheckinInterval":"30s"}`)
	if err != nil {
		t.Fatal(err)
	}
	if c.APIServerURL != "https://m:6443" || c.AgentCheckinInterval.Duration != 30*time.Second || c.GarbageCollectionInterval.Duration != DefaultGarbageCollectionInterval {
		t.Fatalf("%+v", c)
	}
	if _, err := Parse(`{"agentCheckinInterval": 5}`); err == nil {
		t.Fatal("a malformed document is an error")
	}
	d, _ := Parse("")
	if d.AgentCheckinInterval.Duration != DefaultAgentCheckinInterval {
		t.Fatal("defaults")
	}
}

func TestParseAgentTLSMode(t *testing.T) {
	c, err := Parse(`{"agentTLSMode":"strict"}`)
	if err != nil || c.AgentTLSMode != "strict" {
		t.Fatalf("%v %v", c, err)
	}
	if c, _ := Parse(""); c.AgentTLSMode != DefaultAgentTLSMode {
		t.Errorf("default %q", c.AgentTLSMode)
	}
	if _, err := Parse(`{"agentTLSMode":"lenient"}`); err == nil {
		t.Error("an unknown agentTLSMode is refused")
	}
}

func TestParseGitClientTimeoutAndLabels(t *testing.T) {
	c, err := Parse(`{"gitClientTimeout":"5s","ignoreClusterRegistrationLabels":true}`)
	if err != nil || c.GitClientTimeout.Duration != 5*time.Second || !c.IgnoreClusterRegistrationLabels {
		t.Fatalf("%+v %v", c, err)
	}
	if c, _ := Parse(""); c.GitClientTimeout.Duration != DefaultGitClientTimeout || c.IgnoreClusterRegistrationLabels {
		t.Errorf("defaults %+v", c)
	}
}

func TestParseHistoryRetention(t *testing.T) {
	c, err := Parse(`{"historyRetention":"720h","historyRevisions":20}`)
	if err != nil || c.HistoryRetention.Duration != 30*24*time.Hour || c.HistoryRevisions != 20 {
		t.Fatalf("%+v %v", c, err)
	}
	if c, _ := Parse(""); c.HistoryRetention.Duration != DefaultHistoryRetention || c.HistoryRevisions != 0 {
		t.Errorf("defaults %+v", c)
	}
	if _, err := Parse(`{"historyRevisions":-1}`); err == nil || !strings.Contains(err.Error(), "historyRevisions -1") {
		t.Errorf("a negative cap: %v", err)
	}
}
