package helmdeployer

import (
	"fmt"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/validation"
)

// restGetter hands Helm one REST config and one discovery cache for the whole agent. Helm's
// default getter builds a fresh discovery client per action, and discovering every API group
// under client-side throttling is most of what a deploy costs; here discovery runs once and is
// refreshed only when a kind is not found (a chart that brings its own CRDs).
type restGetter struct {
	cfg       *rest.Config
	namespace string
	shared    *discoveryCache
}

// discoveryCache is shared by every getter of one agent, impersonating or not: what the API
// serves does not depend on who asks.
type discoveryCache struct {
	once      sync.Once
	err       error
	discovery discovery.CachedDiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
	cfg       *rest.Config

	// validators are Helm's manifest validators by directive. kubectl's factory builds a new
	// one, with empty caches, for every Build: each install or upgrade then fetched and
	// parsed the OpenAPI v3 documents of every group it touched (core/v1 alone is megabytes),
	// which was most of the agent's allocations and of its peak memory with many deploys at
	// once. The answers depend only on the cluster's API, so one set serves every release.
	mu         sync.Mutex
	validators map[string]validation.Schema

	// caps is what charts see as .Capabilities, and capsAt when it was read. Helm reads it
	// for every install and upgrade and first invalidates the discovery cache, which is this
	// shared one: each deploy would discover every API group again. Handing Helm this copy
	// avoids that; it is read again after Reset (a new CRD) or once it is capabilitiesTTL old
	// (CRDs installed by something other than the agent).
	caps   *chartutil.Capabilities
	capsAt time.Time
}

// capabilitiesTTL bounds how long .Capabilities may miss an API installed by someone else.
const capabilitiesTTL = time.Minute

func newDiscoveryCache(cfg *rest.Config) *discoveryCache {
	return &discoveryCache{cfg: cfg}
}

func (d *discoveryCache) init() error {
	d.once.Do(func() {
		dc, err := discovery.NewDiscoveryClientForConfig(d.cfg)
		if err != nil {
			d.err = err
			return
		}
		d.discovery = memory.NewMemCacheClient(dc)
		d.mapper = restmapper.NewDeferredDiscoveryRESTMapper(d.discovery)
	})
	return d.err
}

// Reset forgets what discovery found, so kinds added since (CRDs) are seen.
func (d *discoveryCache) Reset() {
	if d.init() == nil {
		d.mapper.Reset()
	}
	d.mu.Lock()
	d.validators, d.caps = nil, nil
	d.mu.Unlock()
}

// namespaced reports whether the cluster serves kind gvk in namespaces; a kind it does not
// know is looked up once more after discovery is read again (a CRD installed meanwhile).
func (d *discoveryCache) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	if err := d.init(); err != nil {
		return false, err
	}
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		d.mapper.Reset()
		m, err = d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// capabilities returns the cluster's version and API versions as Helm computes them.
func (d *discoveryCache) capabilities() (*chartutil.Capabilities, error) {
	if err := d.init(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.caps != nil && time.Since(d.capsAt) < capabilitiesTTL {
		return d.caps, nil
	}
	if d.caps != nil {
		d.discovery.Invalidate()
	}
	version, err := d.discovery.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's version: %w", err)
	}
	apiVersions, err := action.GetVersionSet(d.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		// (An API service registered but not served fails one group; the others are kept.)
		return nil, fmt.Errorf("reading the cluster's API versions: %w", err)
	}
	d.caps = &chartutil.Capabilities{APIVersions: apiVersions, HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
		KubeVersion: chartutil.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor}}
	d.capsAt = time.Now()
	return d.caps, nil
}

// validator is the shared validator for a directive, built with the agent's own credentials.
func (d *discoveryCache) validator(directive string) (validation.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.validators[directive]; ok {
		return v, nil
	}
	v, err := cmdutil.NewFactory(&restGetter{cfg: d.cfg, shared: d}).Validator(directive)
	if err != nil {
		return nil, err
	}
	if d.validators == nil {
		d.validators = map[string]validation.Schema{}
	}
	d.validators[directive] = v
	return v, nil
}

// sharedValidators is Helm's kube factory with the agent-wide validators.
type sharedValidators struct {
	kube.Factory
	shared *discoveryCache
}

func (f *sharedValidators) Validator(directive string) (validation.Schema, error) {
	return f.shared.validator(directive)
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if err := g.shared.init(); err != nil {
		return nil, err
	}
	return g.shared.discovery, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	if err := g.shared.init(); err != nil {
		return nil, err
	}
	return g.shared.mapper, nil
}

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}

// Discovery returns the agent's shared discovery client and REST mapper.
func (d *Deployer) Discovery() (discovery.CachedDiscoveryInterface, meta.RESTMapper, error) {
	if err := d.disc.init(); err != nil {
		return nil, nil, err
	}
	return d.disc.discovery, d.disc.mapper, nil
}

// warmKinds are read ahead by Warm: nearly every bundle holds some of them, and the first deploy
// touching a group otherwise waits while that group's OpenAPI document (core/v1 is megabytes)
// is fetched and parsed.
var warmKinds = [][]byte{
	[]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"warm"}}`),
	[]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"warm"}}`),
}

// Warm reads ahead what the first deploy would otherwise wait for: discovery, .Capabilities and
// the validators' documents of the groups in warmKinds.
func (d *Deployer) Warm() error {
	if _, err := d.disc.capabilities(); err != nil {
		return err
	}
	v, err := d.disc.validator(metav1.FieldValidationStrict)
	if err != nil {
		return err
	}
	for _, obj := range warmKinds {
		if err := v.ValidateBytes(obj); err != nil {
			return err
		}
	}
	return nil
}
