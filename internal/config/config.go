// Package config is the manager's configuration: the fleet-controller ConfigMap in the system
// namespace, key "config", a JSON document. The manager reloads it whenever it changes; every
// interval and timeout has its default here.
package config

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ConfigMapName is the ConfigMap holding the configuration.
	ConfigMapName = "fleet-controller"
	// Key is the ConfigMap key holding the JSON document.
	Key = "config"

	// DefaultAgentCheckinInterval is how often agents report to their Cluster.
	DefaultAgentCheckinInterval = 15 * time.Minute
	// DefaultGarbageCollectionInterval is how often agents remove releases of deleted deployments.
	DefaultGarbageCollectionInterval = 15 * time.Minute
	// DefaultGitClientTimeout bounds a request for a repository's latest commit.
	DefaultGitClientTimeout = 30 * time.Second
	// DefaultHistoryRetention is how long the deployment history keeps a revision no cluster
	// runs any longer.
	DefaultHistoryRetention = 90 * 24 * time.Hour
	// DefaultAgentTLSMode: agents trust the system's CA store as well as APIServerCA.
	DefaultAgentTLSMode = "system-store"
)

// Config is the document in the ConfigMap.
type Config struct {
	// APIServerURL is the manager's URL as agents reach it.
	APIServerURL string `json:"apiServerURL,omitempty"`
	// APIServerCA is the PEM CA bundle agents trust for APIServerURL.
	APIServerCA string `json:"apiServerCA,omitempty"`
	// AgentCheckinInterval is how often agents report; a Cluster silent for three intervals is
	// shown Offline.
	AgentCheckinInterval metav1.Duration `json:"agentCheckinInterval,omitempty"`
	// GarbageCollectionInterval is how often agents remove releases of deleted deployments.
	GarbageCollectionInterval metav1.Duration `json:"garbageCollectionInterval,omitempty"`
	// AgentTLSMode is how agents trust the manager's certificate: "system-store" (the system's
	// CA store and APIServerCA) or "strict" (APIServerCA only).
	AgentTLSMode string `json:"agentTLSMode,omitempty"`
	// GitClientTimeout bounds a request for a GitRepo's latest commit (polling).
	GitClientTimeout metav1.Duration `json:"gitClientTimeout,omitempty"`
	// IgnoreClusterRegistrationLabels drops the labels agents ask for when they register: a
	// new Cluster gets none, and labels are set on the manager only.
	IgnoreClusterRegistrationLabels bool `json:"ignoreClusterRegistrationLabels,omitempty"`
	// KubeConfigSecretNamespaces are namespaces from which any Cluster may take its
	// spec.kubeConfigSecret. Otherwise a Cluster's kubeConfigSecretNamespace must be its own
	// namespace: whoever may write Clusters in one namespace must not be able to make the
	// manager read (and use) a kubeconfig kept in another.
	KubeConfigSecretNamespaces []string `json:"kubeConfigSecretNamespaces,omitempty"`
	// HistoryRetention is how long the deployment history keeps a revision no cluster runs any
	// longer (ours; default 90 days).
	HistoryRetention metav1.Duration `json:"historyRetention,omitempty"`
	// HistoryRevisions caps, per Bundle, the revisions the deployment history keeps that no
	// cluster runs any longer, the oldest dropped first (ours; 0: no cap).
	HistoryRevisions int `json:"historyRevisions,omitempty"`
}

// Parse reads the JSON document and fills in defaults.
func Parse(data string) (*Config, error) {
	c := &Config{}
	if data != "" {
		if err := json.Unmarshal([]byte(data), c); err != nil {
			return nil, fmt.Errorf("configmap %s key %s: %w", ConfigMapName, Key, err)
		}
	}
	if c.HistoryRevisions < 0 {
		return nil, fmt.Errorf("configmap %s key %s: historyRevisions %d: must be 0 (no cap) or more", ConfigMapName, Key, c.HistoryRevisions)
	}
	if m := c.AgentTLSMode; m != "" && m != "system-store" && m != "strict" {
		return nil, fmt.Errorf("configmap %s key %s: agentTLSMode %q: must be system-store or strict", ConfigMapName, Key, m)
	}
	return c.WithDefaults(), nil
}

// WithDefaults returns a copy of c with every unset interval at its default.
func (c Config) WithDefaults() *Config {
	if c.AgentCheckinInterval.Duration <= 0 {
		c.AgentCheckinInterval.Duration = DefaultAgentCheckinInterval
	}
	if c.GarbageCollectionInterval.Duration <= 0 {
		c.GarbageCollectionInterval.Duration = DefaultGarbageCollectionInterval
	}
	if c.GitClientTimeout.Duration <= 0 {
		c.GitClientTimeout.Duration = DefaultGitClientTimeout
	}
	if c.AgentTLSMode == "" {
		c.AgentTLSMode = DefaultAgentTLSMode
	}
	if c.HistoryRetention.Duration <= 0 {
		c.HistoryRetention.Duration = DefaultHistoryRetention
	}
	return &c
}

// ConfigMap is the ConfigMap holding c in the system namespace ns, as the fleet chart writes it.
func (c Config) ConfigMap(ns string) (*corev1.ConfigMap, error) {
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: ns},
		Data: map[string]string{Key: string(data)}}, nil
}

// Store holds the configuration in force. The manager makes one and hands it to the
// controllers, which read it on every reconcile; a reload replaces what it holds.
type Store struct {
	current atomic.Pointer[Config]
}

// NewStore holds c, or the defaults when c is nil.
func NewStore(c *Config) *Store {
	if c == nil {
		c, _ = Parse("")
	}
	s := &Store{}
	s.current.Store(c)
	return s
}

// Get returns the configuration in force.
func (s *Store) Get() *Config { return s.current.Load() }

// Set replaces the configuration in force.
func (s *Store) Set(c *Config) { s.current.Store(c) }
