package controller

import (
	"sync"

	lassoclient "github.com/rancher/lasso/pkg/client"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/rest"
)

// Before decoding any object the apiserver sends (every watch event, every write's answer),
// apimachinery's JSON serializer reads its apiVersion and kind with encoding/json, which reads
// the whole document twice (validating it, then decoding two of its fields). The apiserver
// writes those two fields first, so leadingMeta reads only them: at rest with 1,000 clusters
// that whole-document read was a tenth of the manager's CPU (each check-in is a Cluster on its
// watch). Anything else (other members first, escapes in a key or value) is read as before.

// leadingMeta is a json.MetaFactory that reads apiVersion and kind from the first two members of
// an object, and asks apimachinery's own factory when they are not there.
type leadingMeta struct{}

func (leadingMeta) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	if apiVersion, kind, ok := leadingTypeMeta(data); ok {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, err
		}
		return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
	}
	return kjson.DefaultMetaFactory.Interpret(data)
}

// leadingTypeMeta returns the string values of the members apiVersion and kind when they are the
// first two members of the JSON object data, in either order, and their keys and values hold no
// escapes. A watch event as the apiserver frames it (its type, then its object, and nothing
// else: metav1.WatchEvent) has neither: both come back empty, as apimachinery's factory reads
// them, without reading the object. ok is false for anything else.
func leadingTypeMeta(data []byte) (apiVersion, kind string, ok bool) {
	s := jsonScan{data: data}
	if !s.byte('{') {
		return "", "", false
	}
	var seenVersion, seenKind bool
	for i := range 2 {
		if i == 1 && !s.byte(',') {
			return "", "", false
		}
		key, okKey := s.plainString()
		if !okKey || !s.byte(':') {
			return "", "", false
		}
		if i == 1 && key == "object" && !seenVersion && !seenKind {
			return "", "", true // the watch event's object; its type came first
		}
		value, okValue := s.plainString()
		if !okValue {
			return "", "", false
		}
		switch {
		case key == "apiVersion" && !seenVersion:
			apiVersion, seenVersion = value, true
		case key == "kind" && !seenKind:
			kind, seenKind = value, true
		case key == "type" && i == 0:
		default:
			return "", "", false
		}
	}
	if !seenVersion || !seenKind {
		return "", "", false
	}
	return apiVersion, kind, true
}

// jsonScan reads a few tokens from the start of a JSON document.
type jsonScan struct {
	data []byte
	i    int
}

func (s *jsonScan) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c after any white space.
func (s *jsonScan) byte(c byte) bool {
	s.space()
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString consumes a string of printable ASCII without escapes after any white space
// (encoding/json would read escapes and invalid UTF-8 otherwise).
func (s *jsonScan) plainString() (string, bool) {
	if !s.byte('"') {
		return "", false
	}
	start := s.i
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			v := string(s.data[start:s.i])
			s.i++
			return v, true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
		s.i++
	}
	return "", false
}

// leadingMetaSerializers is what lasso negotiates with, with its JSON serializers replaced by
// ones that use leadingMeta (the same options otherwise).
type leadingMetaSerializers struct {
	runtime.NegotiatedSerializer
	infos []runtime.SerializerInfo
}

func newLeadingMetaSerializers(ns runtime.NegotiatedSerializer, creater runtime.ObjectCreater, typer runtime.ObjectTyper) leadingMetaSerializers {
	infos := append([]runtime.SerializerInfo(nil), ns.SupportedMediaTypes()...)
	for i := range infos {
		info := &infos[i]
		if info.MediaType != runtime.ContentTypeJSON {
			continue
		}
		info.Serializer = kjson.NewSerializerWithOptions(leadingMeta{}, creater, typer, kjson.SerializerOptions{})
		info.StrictSerializer = kjson.NewSerializerWithOptions(leadingMeta{}, creater, typer, kjson.SerializerOptions{Strict: true})
		if info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = info.Serializer
			info.StreamSerializer = &stream
		}
		// (No pretty-printing: the manager's requests are never printed.)
		info.PrettySerializer = nil
	}
	return leadingMetaSerializers{NegotiatedSerializer: ns, infos: infos}
}

func (l leadingMetaSerializers) SupportedMediaTypes() []runtime.SerializerInfo { return l.infos }

// leadingMetaClients hands out lasso's clients with a REST client that decodes with
// leadingMetaSerializers; everything else is lasso's.
type leadingMetaClients struct {
	lassoclient.SharedClientFactory
	scheme *runtime.Scheme

	mu   sync.Mutex
	rest rest.Interface
}

func (f *leadingMetaClients) ForKind(gvk schema.GroupVersionKind) (*lassoclient.Client, error) {
	c, err := f.SharedClientFactory.ForKind(gvk)
	if err != nil {
		return nil, err
	}
	return f.patch(c)
}

func (f *leadingMetaClients) ForResource(gvr schema.GroupVersionResource, namespaced bool) (*lassoclient.Client, error) {
	c, err := f.SharedClientFactory.ForResource(gvr, namespaced)
	if err != nil {
		return nil, err
	}
	return f.patch(c)
}

func (f *leadingMetaClients) ForResourceKind(gvr schema.GroupVersionResource, kind string, namespaced bool) *lassoclient.Client {
	c := f.SharedClientFactory.ForResourceKind(gvr, kind, namespaced)
	if patched, err := f.patch(c); err == nil {
		return patched
	}
	return c
}

// patch gives c, once, the REST client made from its own configuration (lasso's, shared by all
// its clients) with leadingMetaSerializers.
func (f *leadingMetaClients) patch(c *lassoclient.Client) (*lassoclient.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rest != nil && c.RESTClient == f.rest {
		return c, nil
	}
	if f.rest == nil {
		cfg := c.Config
		cfg.NegotiatedSerializer = newLeadingMetaSerializers(cfg.NegotiatedSerializer, f.scheme, f.scheme)
		rc, err := rest.UnversionedRESTClientFor(&cfg)
		if err != nil {
			return nil, err
		}
		f.rest = rc
	}
	c.RESTClient = f.rest
	return c, nil
}
