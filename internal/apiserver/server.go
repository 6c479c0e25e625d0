// Package apiserver is mizzen's HTTP front. Its request chain (chain.go) authenticates
// requests and applies impersonation (package authn), then authorizes them (package
// authz, its authorizers fed from the watch cache when they follow stored policy);
// the REST core here routes them to the resource they name and serves the generic REST
// verbs (get, list, watch, create, update, patch, delete, deletecollection) for every
// resource in the registry, plus discovery, the subresources, the access reviews,
// health and version, handing aggregated APIs to package aggregator and the pod,
// service and node proxies to package proxy. Storage lives in internal/storage;
// everything resource-specific comes from internal/registry.
package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1beta1 "k8s.io/apimachinery/pkg/apis/meta/v1beta1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"mizzen/internal/apiserver/admission"
	"mizzen/internal/apiserver/admission/plugins"
	"mizzen/internal/apiserver/aggregator"
	"mizzen/internal/apiserver/authn"
	"mizzen/internal/apiserver/authn/bootstraptoken"
	"mizzen/internal/apiserver/authz"
	"mizzen/internal/apiserver/compression"
	"mizzen/internal/apiserver/fieldmanager"
	"mizzen/internal/apiserver/flowcontrol"
	"mizzen/internal/apiserver/maxinflight"
	"mizzen/internal/apiserver/openapi"
	"mizzen/internal/apiserver/proxy"
	"mizzen/internal/apiserver/requestmetrics"
	"mizzen/internal/apiserver/satoken"
	"mizzen/internal/flightrecorder"
	"mizzen/internal/registry"
	"mizzen/internal/storage"
)

// Config is everything the server is built from.
type Config struct {
	Store     *storage.Store
	Resources []*registry.Resource
	// ClientCAs is the pool the TLS listener verifies client certificates against (the
	// only way in until the security work); the listener must be configured with it.
	ClientCAs *x509.CertPool
	// ServiceCIDR is where ClusterIPs come from; NodePortRange where nodePorts do.
	ServiceCIDR  *net.IPNet
	NodePortBase int
	NodePortSize int
	Log          *slog.Logger
	// ExternalAddress is host:port as clients reach this server (for discovery).
	ExternalAddress string
	// OpenAPI serves /openapi/v2 and /openapi/v3 when set.
	OpenAPI http.Handler
	// Profiling serves Go's profiles under /debug/pprof/, a non-resource path the
	// authorizer judges like any other (kube-apiserver's --profiling).
	Profiling bool
	// FlightRecorder answers flightrecorder.Path when Profiling is on (nil: not found).
	FlightRecorder http.Handler
	// AdmissionPlugins names the admission plugins to run (plugins.Enabled resolves
	// the flags into them); the chain runs them in upstream's order.
	AdmissionPlugins []string
	// StorageValidators check writes with the resource's own validation, before the
	// validating admission plugins (RBAC's escalation check).
	StorageValidators []admission.Validator
	// Authorizer refuses requests; nil lets every authenticated user through.
	Authorizer Authorizer
	// ServiceAccountIssuer signs and verifies service account tokens: the TokenRequest
	// API, bearer token authentication and OpenID discovery; nil disables them.
	ServiceAccountIssuer *satoken.Signer
	// APIAudiences are the audiences a token must name to be accepted here, and those a
	// TokenRequest without audiences gets; every issuer of ServiceAccountIssuer when
	// empty.
	APIAudiences []string
	// KubeletClientTLS is how the server reaches kubelets for pods/log, exec, attach,
	// portforward and nodes/proxy: its client certificate and the CAs it trusts. Those
	// subresources answer 503 without it.
	KubeletClientTLS *tls.Config
	// FrontProxy is how the server authenticates to aggregated API servers (APIServices
	// naming a Service); without it they get requests without a client certificate.
	FrontProxy *FrontProxyConfig
	// ClientCAPEM is the CA bundle of ClientCAs, published with FrontProxy in
	// kube-system/extension-apiserver-authentication for aggregated servers.
	ClientCAPEM []byte
	// BootstrapTokenAuth authenticates bootstrap tokens (--enable-bootstrap-token-auth).
	BootstrapTokenAuth bool
	// AnonymousAuth makes a request without credentials system:anonymous on every
	// path, for the authorizer to judge (--anonymous-auth); without it only health
	// and version are served to such requests.
	AnonymousAuth bool
	// AggregatorInterval is how often aggregated APIs are checked; 10s when zero.
	AggregatorInterval time.Duration
	// UI serves the web UI at /ui/ once a request for it is authenticated and
	// authorized (ui.go); nil serves none there.
	UI UIHandler
	// DisablePriorityAndFairness turns API Priority and Fairness off
	// (--enable-priority-and-fairness=false): requests are then never queued or
	// rejected for load.
	DisablePriorityAndFairness bool
	// MaxRequestsInflight and MaxMutatingRequestsInflight sum to the seats the
	// priority levels share (upstream's flags of those names; 0 and 0: 400 and 200).
	MaxRequestsInflight, MaxMutatingRequestsInflight int
}

// Server serves the Kubernetes API.
type Server struct {
	cfg      Config
	scheme   *runtime.Scheme
	codecs   *codecs
	store    *storage.Store
	cache    *storage.Cache
	handlers map[schema.GroupVersionResource]*resourceHandler
	groups   []groupInfo
	services *serviceAllocator
	// fields keeps managedFields and merges server-side apply.
	fields    *fieldmanager.Managers
	log       *slog.Logger
	ready     atomic.Bool
	discovery atomic.Pointer[discoveryDocs]
	// custom serves the resources of CustomResourceDefinitions (customresources.go).
	custom *customAPIs
	// customOpenAPI publishes the custom resources' schemas, when the OpenAPI handler
	// takes them.
	customOpenAPI func([]*registry.Resource)
	// proxy relays pods/proxy, services/proxy and the kubelet subresources.
	proxy *proxy.Proxy
	// followerFeed keeps what follows stored objects current: an authorizer (RBAC) and
	// the priority-and-fairness configuration; nil when nothing does.
	followerFeed *followerFeed
	// flowControl is API Priority and Fairness (flowcontrol.go); nil when disabled.
	flowControl *flowcontrol.Controller
	// inflight limits the requests served at once when flowControl is off
	// (--max-requests-inflight, --max-mutating-requests-inflight); nil for no limit.
	inflight *maxinflight.Limiter
	// aggregator proxies APIServices that name a Service.
	aggregator *aggregator.Aggregator
	// admission is the chain of enabled admission plugins.
	admission admission.Chain
	// saTokens authenticates ServiceAccount tokens and reviews them for TokenReview.
	saTokens *authn.ServiceAccountTokens
	// metrics are /metrics: every resource request's latency and code.
	metrics *requestmetrics.Metrics
	// handler is the request chain (chain.go) in front of the REST core.
	handler http.Handler
	// authenticated is the chain after authentication, for the UI's requests as its
	// user (ui.go).
	authenticated http.Handler
	// bootstrapTokens authenticates bootstrap tokens; nil when they are off.
	bootstrapTokens *bootstraptoken.Authenticator
}

// resourceHandler is one served resource with what the server derives from it.
type resourceHandler struct {
	*registry.Resource
	// segment is the storage key segment; storage the resource whose type is stored.
	segment string
	storage *registry.Resource
	// selectableFields are the field-selector fields the served version supports,
	// computed once.
	selectableFields fields.Set
	// chunks keep the resource's gzipped lists' items compressed, per format
	// (storage.JSONSlot, storage.ProtobufSlot); made by the first such list.
	chunks [2]atomic.Pointer[compression.Chunks]
}

// listChunks returns the compressed items of the resource's lists in one format.
func (h *resourceHandler) listChunks(slot int) *compression.Chunks {
	if c := h.chunks[slot].Load(); c != nil {
		return c
	}
	h.chunks[slot].CompareAndSwap(nil, compression.NewChunks())
	return h.chunks[slot].Load()
}

// groupInfo lists a group's versions in preference order.
type groupInfo struct {
	name     string
	versions []string
}

// segmentFor is the etcd key segment of a group-resource.
func segmentFor(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

// New builds the server. Run must be called to start its watch cache.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		return nil, err
	}
	if err := metav1beta1.AddMetaToScheme(scheme); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	s := &Server{cfg: cfg, scheme: scheme, store: cfg.Store, handlers: map[schema.GroupVersionResource]*resourceHandler{}, log: cfg.Log,
		metrics: requestmetrics.New()}

	primary := map[schema.GroupResource]*registry.Resource{}
	for _, r := range cfg.Resources {
		gvk := r.GroupVersionKind()
		if !scheme.Recognizes(gvk) {
			scheme.AddKnownTypeWithName(gvk, r.New())
			scheme.AddKnownTypeWithName(r.GroupVersion.WithKind(r.Kind+"List"), r.NewList())
			metav1.AddToGroupVersion(scheme, r.GroupVersion)
		}
		if r.StorageResource == nil {
			gr := r.GroupVersionResource().GroupResource()
			if _, dup := primary[gr]; !dup {
				primary[gr] = r
			}
		}
	}
	var cacheConfigs []storage.ResourceConfig
	for gr, r := range primary {
		r := r
		cacheConfigs = append(cacheConfigs, storage.ResourceConfig{
			Segment: segmentFor(gr), Kind: r.GroupVersionKind(), New: r.New,
			Fields:       func(obj runtime.Object) storage.Pairs { return objectFields(r, obj) },
			Protobuf:     s.encodeProtobuf,
			IndexedField: indexedField(gr),
			KeepDecoded:  gr == namespacesGVR.GroupResource() || gr == serviceAccountsGVR.GroupResource(),
		})
	}
	groupVersions := map[string][]string{}
	var groupOrder []string
	for _, r := range cfg.Resources {
		h := &resourceHandler{Resource: r, selectableFields: fieldNames(r)}
		gr := r.GroupVersionResource().GroupResource()
		if r.StorageResource != nil {
			gr = *r.StorageResource
		}
		h.storage = primary[gr]
		if h.storage == nil {
			return nil, fmt.Errorf("resource %s: no resource stores %s", r.GroupVersionResource(), gr)
		}
		h.segment = segmentFor(gr)
		s.handlers[r.GroupVersionResource()] = h
		g := r.GroupVersion.Group
		if _, ok := groupVersions[g]; !ok {
			groupOrder = append(groupOrder, g)
		}
		if !contains(groupVersions[g], r.GroupVersion.Version) {
			groupVersions[g] = append(groupVersions[g], r.GroupVersion.Version)
		}
	}
	for _, c := range unstoredResources() {
		g := c.gvr.Group
		if _, ok := groupVersions[g]; !ok {
			groupOrder = append(groupOrder, g)
		}
		if !contains(groupVersions[g], c.gvr.Version) {
			groupVersions[g] = append(groupVersions[g], c.gvr.Version)
		}
	}
	for _, g := range groupOrder {
		s.groups = append(s.groups, groupInfo{name: g, versions: sortVersions(groupVersions[g])})
	}
	s.codecs = newCodecs(scheme)
	s.fields = fieldmanager.New(cfg.Log, scheme, cfg.Resources, func() (map[string]*spec.Schema, error) { return openapi.Models(cfg.Resources) })
	s.cache = cfg.Store.NewCache(cacheConfigs, cfg.Log)
	if cfg.ServiceCIDR != nil {
		s.services = newServiceAllocator(cfg.Store, cfg.ServiceCIDR, cfg.NodePortBase, cfg.NodePortSize)
	}
	s.custom = newCustomAPIs()
	if o, ok := cfg.OpenAPI.(interface{ SetCustom([]*registry.Resource) }); ok {
		s.customOpenAPI = o.SetCustom
	}
	s.discovery.Store(s.buildDiscovery())
	followers := authz.Followers(cfg.Authorizer)
	if !cfg.DisablePriorityAndFairness {
		s.flowControl = flowcontrol.New(flowcontrol.Options{
			ServerSeats:   cfg.MaxRequestsInflight + cfg.MaxMutatingRequestsInflight,
			WriteDangling: s.writeFlowSchemaDangling,
			Logger:        cfg.Log,
		})
		s.metrics.Register(s.flowControl.Collectors()...)
		followers = append(followers, s.flowControl)
	} else if s.inflight = maxinflight.New(cfg.MaxRequestsInflight, cfg.MaxMutatingRequestsInflight, nil); s.inflight != nil {
		s.metrics.Register(s.inflight.Collectors()...)
	}
	s.followerFeed = newFollowerFeed(followers, primary)
	s.proxy = proxy.New(proxyObjects{s}, proxyResponder{s}, cfg.KubeletClientTLS, cfg.Log)
	s.aggregator = aggregator.New(aggregatorHost{s}, cfg.FrontProxy, cfg.AggregatorInterval, cfg.Log)
	chain, err := plugins.New(cfg.AdmissionPlugins, admission.Deps{Reader: admissionReader{s}, StatusWriter: admissionReader{s}, Services: admissionReader{s}, Apply: s.fields, Converter: admissionReader{s}, Authorizer: cfg.Authorizer, Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	s.admission = chain
	s.saTokens = &authn.ServiceAccountTokens{Signer: cfg.ServiceAccountIssuer, Audiences: cfg.APIAudiences, Objects: tokenObjects{s}}
	s.bootstrapTokens = s.newBootstrapTokens()
	s.handler = s.buildHandlerChain()
	return s, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// objectFields is the field-selector fields of an object: metadata.name and
// metadata.namespace, plus what the resource adds. They are built as pairs, without
// a map of their own, because every write to the cache computes them.
func objectFields(r *registry.Resource, obj runtime.Object) storage.Pairs {
	var set fields.Set
	if r.Fields != nil {
		set = r.Fields(obj)
	}
	p := make(storage.Pairs, 0, 2*len(set)+4)
	for k, v := range set {
		p = append(p, k, v)
	}
	if acc, err := meta.Accessor(obj); err == nil {
		p = append(p, "metadata.name", acc.GetName())
		if r.Namespaced {
			p = append(p, "metadata.namespace", acc.GetNamespace())
		}
	}
	return p.Sorted()
}

// fieldNames is the set of the field-selector fields a resource supports.
func fieldNames(r *registry.Resource) fields.Set {
	p := objectFields(r, r.New())
	set := make(fields.Set, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		set[p[i]] = ""
	}
	return set
}

// Run starts the watch cache, the authorizer's feed from it and the aggregation layer,
// and blocks until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if s.followerFeed != nil {
		go func() {
			select {
			case <-s.cache.Ready():
				s.followerFeed.run(ctx, s)
			case <-ctx.Done():
			}
		}()
	}
	if s.flowControl != nil {
		go s.flowControl.RunStatus(ctx)
		go s.flowControl.RunBorrowing(ctx)
	}
	go s.aggregator.Run(ctx)
	go s.runCRDs(ctx)
	return s.cache.Run(ctx)
}

// WaitCacheSynced waits until the watch cache has loaded, and the authorizer has
// what it follows.
func (s *Server) WaitCacheSynced(ctx context.Context) error {
	select {
	case <-s.cache.Ready():
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.WaitAuthorizerFresh(ctx)
}

// MarkReady makes /readyz answer ok.
func (s *Server) MarkReady() { s.ready.Store(true) }

// ServeHTTP serves a request through the request chain (chain.go): health and
// version also for a request without credentials, everything else only for an
// authenticated user; each only when authorized.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Requests are short-lived and reach deep frames (stack.go); watches, which live
	// long, keep a small stack.
	if r.Method != http.MethodGet {
		growStack(len(r.Method))
	} else if !mayWatch(r) {
		growStackForRead(len(r.Method))
	}
	defer func() {
		// A bug in one request must not take the server down; the client gets a 500.
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			s.writeError(w, r, fmt.Errorf("internal error: %v", p))
		}
	}()
	s.handler.ServeHTTP(w, r)
}

// serveAuthorized serves a request the chain (chain.go) authenticated and authorized:
// health and version, aggregated APIs, non-resource paths, then the REST core.
func (s *Server) serveAuthorized(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(withWarnings(r.Context(), w))
	if isPublicPath(r.URL.Path) {
		s.servePublic(w, r)
		return
	}
	info := requestInfoFrom(r.Context())
	if info == nil || info.Resource == "" {
		// Discovery, OpenAPI, OpenID and unknown paths are non-resource requests,
		// authorized by path, as upstream; so is the UI.
		if s.cfg.UI != nil && isUIPath(r.URL.Path) {
			s.serveUI(w, r)
			return
		}
		if s.serveAggregated(w, r, info) {
			return
		}
		s.serveNonResource(w, r)
		return
	}
	// An aggregated API's requests go on to its server once authorized here, as
	// upstream's aggregator sits behind the apiserver's authorization.
	if s.serveAggregated(w, r, info) {
		return
	}
	if compressible(info) && compression.Accepts(r) {
		cw := compression.NewWriter(w)
		defer cw.Close()
		w = cw
	}
	gvr := schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource}
	if u := unstored(gvr); u != nil {
		s.serveUnstored(w, r, info, u)
		return
	}
	h := s.handlers[gvr]
	if h == nil {
		if ch := s.custom.handler(gvr); ch != nil {
			s.serveCustom(w, r, info, ch)
			return
		}
		if info.Name == "" && s.serveDiscovery(w, r) {
			return
		}
		s.writeError(w, r, notFound())
		return
	}
	s.serveResource(w, r, info, h)
}

// compressible reports whether a resource request's response is an encoded object,
// which upstream gzips when it is large and the client accepts gzip (package
// compression). Watches never are, nor the streams and proxied bytes of the
// connect subresources.
func compressible(info *requestInfo) bool {
	if info.Verb == "watch" {
		return false
	}
	switch info.Subresource {
	case "log", "exec", "attach", "portforward", "proxy":
		return false
	}
	return true
}

// isPublicPath reports whether a path is served to requests without credentials.
func isPublicPath(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	return strings.HasPrefix(path, "/healthz/") || strings.HasPrefix(path, "/livez/") || strings.HasPrefix(path, "/readyz/")
}

// servePublic serves health and version.
func (s *Server) servePublic(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/version", "/version/":
		s.serveVersion(w, r)
		return
	}
	endpoint, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.serveHealth(w, r, endpoint)
}

// serveNonResource serves an authorized non-resource request.
func (s *Server) serveNonResource(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/api" || path == "/apis" || path == "/api/" || path == "/apis/":
		s.serveDiscoveryRoot(w, r)
		return
	case strings.HasPrefix(path, "/openapi/"):
		if s.cfg.OpenAPI != nil {
			s.cfg.OpenAPI.ServeHTTP(w, r)
			return
		}
	case path == "/metrics":
		s.metrics.Handler().ServeHTTP(w, r)
		return
	case s.cfg.Profiling && path == flightrecorder.Path && s.cfg.FlightRecorder != nil:
		s.cfg.FlightRecorder.ServeHTTP(w, r)
		return
	case s.cfg.Profiling && strings.HasPrefix(path, "/debug/pprof"):
		serveProfile(w, r)
		return
	case s.flowControl != nil && strings.HasPrefix(path, flowcontrol.DebugPathPrefix) && s.flowControl.ServeDebug(w, r):
		return
	case s.serveOpenID(w, r):
		return
	}
	if s.serveDiscovery(w, r) {
		return
	}
	s.writeError(w, r, notFound())
}

func writeText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(text))
}
