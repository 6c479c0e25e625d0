// Package aggregator is the aggregation layer. An APIService whose spec names a Service
// registers an API group version served elsewhere (metrics.k8s.io by the metrics
// server): requests under /apis/<group>/<version> are authenticated and authorized by
// the apiserver's chain, then proxied here to a ready endpoint of that Service over
// TLS, the user passed on in front-proxy headers (X-Remote-User, X-Remote-Group,
// X-Remote-Extra-*) that the backend trusts because the connection presents the
// front-proxy client certificate. A reconcile loop keeps each
// such APIService's Available condition (upstream's checks and reasons) and fetches its
// discovery document, which /api and /apis then list beside the local groups.
package aggregator

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/proxy"
	versioninfo "k8s.io/apimachinery/pkg/version"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/apiserver/flowcontrol"
	"mizzen/internal/registry"
)

// FrontProxyConfig is how this server authenticates to aggregated API servers, as
// upstream's --proxy-client-cert-file/--proxy-client-key-file and
// --requestheader-client-ca-file/--requestheader-allowed-names.
type FrontProxyConfig struct {
	// ClientCertificate is presented to aggregated servers.
	ClientCertificate tls.Certificate
	// CAPEM is the CA that signed it, published for aggregated servers to verify it.
	CAPEM []byte
	// AllowedNames are the common names aggregated servers should accept from it.
	AllowedNames []string
}

// The request headers that carry the user to an aggregated server, as upstream's
// --requestheader-*-headers defaults.
const (
	RemoteUserHeader   = "X-Remote-User"
	RemoteGroupHeader  = "X-Remote-Group"
	RemoteExtraPrefix  = "X-Remote-Extra-"
	aggregatorUserName = "system:kube-aggregator"
	auditIDHeader      = "Audit-ID"
)

// discoveryTimeout bounds an aggregated server's answer to the discovery of its group
// version, as upstream's aggregator does: clients discover every group before they
// act, and one slow server must not hold them all up. (A variable for the tests.)
var discoveryTimeout = 5 * time.Second

// Host is what the aggregator reads and writes of the apiserver it runs in.
type Host interface {
	// Ready is closed once the watch cache has loaded.
	Ready() <-chan struct{}
	// APIServices are the stored APIServices, from the watch cache.
	APIServices() ([]*apiregistrationv1.APIService, error)
	// ServesGroup reports whether the server serves a version of the group itself.
	ServesGroup(group string) bool
	// ServiceRevisions are the revisions of a Service and of its EndpointSlices in the
	// watch cache (0 and none for those missing), so changes are noticed cheaply.
	ServiceRevisions(namespace, name string) (service int64, slices []int64)
	Service(ctx context.Context, namespace, name string) (*corev1.Service, error)
	// EndpointSlices are those of the Service, read consistently.
	EndpointSlices(ctx context.Context, namespace, service string) ([]*discoveryv1.EndpointSlice, error)
	// ServiceEndpoint picks a ready host:port of the Service's port (a name or a number).
	ServiceEndpoint(ctx context.Context, svc *corev1.Service, port, id string) (string, error)
	// UpdateAPIServiceStatus updates an APIService's status with update.
	UpdateAPIServiceStatus(ctx context.Context, name string, update func(*apiregistrationv1.APIService)) error
	// LocalDiscovery are the server's own /apis documents: the APIGroupList and the
	// aggregated APIGroupDiscoveryList, JSON.
	LocalDiscovery() (groupList, aggregated []byte)
	// WriteError answers a request with an error as the server does.
	WriteError(w http.ResponseWriter, r *http.Request, err error)
}

// defaultAggregatorInterval is how often every aggregated API's availability and
// discovery are checked again; changes to APIServices are noticed within a second.
const defaultAggregatorInterval = 10 * time.Second

// aggregatedAPI is one APIService served by a Service, with what was last learnt of it.
type aggregatedAPI struct {
	apiService      string
	group, version  string
	groupPriority   int32
	versionPriority int32
	service         apiregistrationv1.ServiceReference
	// transport reaches the Service's endpoints with the APIService's TLS settings.
	transport *http.Transport
	// available is the outcome of the last check; requests are only proxied while it
	// holds, as upstream's proxy refuses an unavailable APIService.
	available bool
	// resources is the last discovery document fetched; nil until one was.
	resources *metav1.APIResourceList
	// fresh says whether the last fetch succeeded.
	fresh bool
}

// aggregatedState is what routing and discovery read: replaced whole on every change.
type aggregatedState struct {
	byGroupVersion map[string]*aggregatedAPI // "group/version"
	groupList      []byte                    // /apis, local and aggregated groups
	aggGroups      []byte                    // aggregated-discovery /apis
	groups         map[string][]byte         // /apis/<group> of aggregated groups
}

// Aggregator runs the aggregation layer for one server.
type Aggregator struct {
	host       Host
	frontProxy *FrontProxyConfig
	log        *slog.Logger
	interval   time.Duration
	state      atomic.Pointer[aggregatedState]
	// stateMu orders the writers of state.
	stateMu sync.Mutex

	// transports are kept across reconciles, by the settings they were built from.
	mu         sync.Mutex
	transports map[string]*http.Transport
}

// New returns the aggregator of host. frontProxy, when set, is the client certificate
// presented to aggregated servers; interval is how often every aggregated API is
// checked again, 10s when zero.
func New(host Host, frontProxy *FrontProxyConfig, interval time.Duration, log *slog.Logger) *Aggregator {
	if interval <= 0 {
		interval = defaultAggregatorInterval
	}
	if log == nil {
		log = slog.Default()
	}
	return &Aggregator{host: host, frontProxy: frontProxy, log: log, interval: interval, transports: map[string]*http.Transport{}}
}

// current is the state, nil before the first reconcile.
func (a *Aggregator) current() *aggregatedState { return a.state.Load() }

// Run reconciles every interval, and within a second of an aggregated APIService's
// spec, its Service or the Service's EndpointSlices changing, until ctx ends.
func (a *Aggregator) Run(ctx context.Context) {
	select {
	case <-a.host.Ready():
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastSpecs string
	var lastFull time.Time
	for {
		services, err := a.listAPIServices()
		if err != nil {
			a.log.Warn("aggregator: listing APIServices", "err", err)
		} else if specs := a.fingerprint(services); specs != lastSpecs || time.Since(lastFull) >= a.interval {
			a.reconcile(ctx, services)
			lastSpecs, lastFull = specs, time.Now()
		}
		select {
		case <-ctx.Done():
			a.closeTransports(nil)
			return
		case <-tick.C:
		}
	}
}

// listAPIServices lists the APIServices that name a Service, for groups this server
// does not serve itself (mixing local and remote versions of one group is not
// supported).
func (a *Aggregator) listAPIServices() ([]*apiregistrationv1.APIService, error) {
	all, err := a.host.APIServices()
	if err != nil {
		return nil, err
	}
	var out []*apiregistrationv1.APIService
	for _, svc := range all {
		if svc.Spec.Service == nil || a.host.ServesGroup(svc.Spec.Group) {
			continue
		}
		out = append(out, svc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// fingerprint changes whenever an aggregated APIService is added, removed or has its
// spec changed, or the Service it names or that Service's EndpointSlices change; not on
// status writes, which the reconcile makes itself. It reads only the watch cache.
func (a *Aggregator) fingerprint(services []*apiregistrationv1.APIService) string {
	var b strings.Builder
	for _, svc := range services {
		spec, _ := json.Marshal(svc.Spec)
		fmt.Fprintf(&b, "%s=%s", svc.Name, spec)
		ref := svc.Spec.Service
		service, slices := a.host.ServiceRevisions(ref.Namespace, ref.Name)
		if service != 0 {
			fmt.Fprintf(&b, " service@%d", service)
		}
		for _, rv := range slices {
			fmt.Fprintf(&b, " slice@%d", rv)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// reconcile checks every aggregated APIService, records its Available condition and
// discovery, and publishes the new state.
func (a *Aggregator) reconcile(ctx context.Context, services []*apiregistrationv1.APIService) {
	prev := a.current()
	next := &aggregatedState{byGroupVersion: map[string]*aggregatedAPI{}, groups: map[string][]byte{}}
	inUse := map[string]bool{}
	// The conditions are written once the new state serves requests, so that a client
	// that reads Available=True finds its requests proxied.
	type condition struct {
		svc             *apiregistrationv1.APIService
		status          apiregistrationv1.ConditionStatus
		reason, message string
	}
	var conditions []condition
	for _, svc := range services {
		api := &aggregatedAPI{
			apiService: svc.Name, group: svc.Spec.Group, version: svc.Spec.Version,
			groupPriority: svc.Spec.GroupPriorityMinimum, versionPriority: svc.Spec.VersionPriority,
			service: *svc.Spec.Service,
		}
		if api.service.Port == nil {
			port := int32(443)
			api.service.Port = &port
		}
		key, transport, err := a.transportFor(svc)
		if err != nil {
			conditions = append(conditions, condition{svc, apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error()})
			continue
		}
		inUse[key] = true
		api.transport = transport
		if prev != nil {
			if old := prev.byGroupVersion[svc.Spec.Group+"/"+svc.Spec.Version]; old != nil && old.apiService == svc.Name {
				api.resources = old.resources
			}
		}
		status, reason, message := a.check(ctx, api)
		api.available = status == apiregistrationv1.ConditionTrue
		conditions = append(conditions, condition{svc, status, reason, message})
		next.byGroupVersion[api.group+"/"+api.version] = api
	}
	a.closeTransports(inUse)
	a.stateMu.Lock()
	a.buildDiscovery(next)
	a.state.Store(next)
	a.stateMu.Unlock()
	for _, c := range conditions {
		a.setAvailable(ctx, c.svc, c.status, c.reason, c.message)
	}
}

// LocalChanged merges the aggregated groups into the server's own discovery again,
// after the resources it serves itself changed (a CRD was established or removed).
func (a *Aggregator) LocalChanged() {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	prev := a.current()
	if prev == nil {
		return
	}
	next := &aggregatedState{byGroupVersion: prev.byGroupVersion, groups: map[string][]byte{}}
	a.buildDiscovery(next)
	a.state.Store(next)
}

// check runs upstream's availability checks in order: the Service exists, declares the
// port, has a ready endpoint for it, and the discovery document answers. A successful
// fetch also refreshes api.resources.
func (a *Aggregator) check(ctx context.Context, api *aggregatedAPI) (apiregistrationv1.ConditionStatus, string, string) {
	ref := api.service
	svc, err := a.host.Service(ctx, ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return apiregistrationv1.ConditionFalse, "ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace)
	}
	if err != nil {
		return apiregistrationv1.ConditionUnknown, "ServiceAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
	}
	portName := ""
	found := false
	for _, p := range svc.Spec.Ports {
		if p.Port == *ref.Port {
			portName, found = p.Name, true
			break
		}
	}
	if !found {
		return apiregistrationv1.ConditionFalse, "ServicePortError", fmt.Sprintf("service/%s in %q is not listening on port %d", ref.Name, ref.Namespace, *ref.Port)
	}
	slices, err := a.host.EndpointSlices(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return apiregistrationv1.ConditionUnknown, "EndpointsAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
	}
	if len(slices) == 0 {
		return apiregistrationv1.ConditionFalse, "EndpointsNotFound", fmt.Sprintf("cannot find endpointslices for service/%s in %q", ref.Name, ref.Namespace)
	}
	host, err := a.host.ServiceEndpoint(ctx, svc, portName, ref.Name)
	if err != nil {
		return apiregistrationv1.ConditionFalse, "MissingEndpoints", fmt.Sprintf("endpointslices for service/%s in %q have no addresses with port name %q", ref.Name, ref.Namespace, portName)
	}
	discoveryURL := &url.URL{Scheme: "https", Host: host, Path: "/apis/" + api.group + "/" + api.version}
	list, err := a.fetchDiscovery(ctx, api.transport, discoveryURL)
	if err != nil {
		api.fresh = false
		return apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error()
	}
	api.resources, api.fresh = list, true
	return apiregistrationv1.ConditionTrue, "Passed", "all checks passed"
}

// fetchDiscovery reads an aggregated server's discovery document for its group
// version, as the aggregator's own identity in system:masters.
func (a *Aggregator) fetchDiscovery(ctx context.Context, transport *http.Transport, u *url.URL) (*metav1.APIResourceList, error) {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	setRemoteUser(req.Header, registry.User{Name: aggregatorUserName, Groups: []string{"system:masters"}})
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("failing or missing response from %v: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("failing or missing response from %v: %w", u, err)
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return nil, fmt.Errorf("bad status from %v: %d", u, resp.StatusCode)
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(body, list); err != nil {
		return nil, fmt.Errorf("failing or missing response from %v: %w", u, err)
	}
	return list, nil
}

// setAvailable writes the Available condition when it changed; the transition time
// moves only when the status does.
func (a *Aggregator) setAvailable(ctx context.Context, svc *apiregistrationv1.APIService, status apiregistrationv1.ConditionStatus, reason, message string) {
	for _, c := range svc.Status.Conditions {
		if c.Type == apiregistrationv1.Available && c.Status == status && c.Reason == reason && c.Message == message {
			return
		}
	}
	err := a.host.UpdateAPIServiceStatus(ctx, svc.Name, func(cur *apiregistrationv1.APIService) {
		cond := apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
		replaced := false
		for i, c := range cur.Status.Conditions {
			if c.Type != apiregistrationv1.Available {
				continue
			}
			if c.Status == status {
				cond.LastTransitionTime = c.LastTransitionTime
			}
			cur.Status.Conditions[i], replaced = cond, true
		}
		if !replaced {
			cur.Status.Conditions = append(cur.Status.Conditions, cond)
		}
	})
	if err != nil && !apierrors.IsNotFound(err) {
		a.log.Warn("aggregator: updating APIService status", "apiservice", svc.Name, "err", err)
		return
	}
	a.log.Info("aggregated API availability", "apiservice", svc.Name, "status", status, "reason", reason, "message", message)
}

// transportFor is the transport to an APIService's Service: the front-proxy client
// certificate, and the serving certificate verified against spec.caBundle for the
// name <service>.<namespace>.svc unless spec.insecureSkipTLSVerify.
func (a *Aggregator) transportFor(svc *apiregistrationv1.APIService) (string, *http.Transport, error) {
	ref := svc.Spec.Service
	sum := sha256.Sum256(svc.Spec.CABundle)
	key := fmt.Sprintf("%s|%s/%s|%t|%x", svc.Name, ref.Namespace, ref.Name, svc.Spec.InsecureSkipTLSVerify, sum)
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.transports[key]; ok {
		return key, t, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: ref.Name + "." + ref.Namespace + ".svc"}
	if fp := a.frontProxy; fp != nil {
		cfg.Certificates = []tls.Certificate{fp.ClientCertificate}
	}
	switch {
	case svc.Spec.InsecureSkipTLSVerify:
		cfg.InsecureSkipVerify = true //nolint:gosec // the APIService asks for it
	case len(svc.Spec.CABundle) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(svc.Spec.CABundle) {
			return "", nil, errors.New("spec.caBundle holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	t := &http.Transport{
		TLSClientConfig:     cfg,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 10,
		IdleConnTimeout:     90 * time.Second,
	}
	a.transports[key] = t
	return key, t, nil
}

// closeTransports drops the transports not in keep (all when keep is nil).
func (a *Aggregator) closeTransports(keep map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, t := range a.transports {
		if !keep[k] {
			t.CloseIdleConnections()
			delete(a.transports, k)
		}
	}
}

// Serve proxies a request for an aggregated group version, after the server authorized
// it as any other; it reports whether the path was one. gv is the request's group
// version when the server parsed it as a resource request, nil to read it from the path.
func (a *Aggregator) Serve(w http.ResponseWriter, r *http.Request, gv *schema.GroupVersion) bool {
	st := a.current()
	if st == nil || len(st.byGroupVersion) == 0 {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/apis/")
	if !ok {
		return false
	}
	var group, version string
	if gv != nil {
		group, version = gv.Group, gv.Version
	} else {
		group, rest, _ = strings.Cut(strings.Trim(rest, "/"), "/")
		version, _, _ = strings.Cut(rest, "/")
	}
	if version == "" {
		// /apis/<group>: this server answers from what it learnt.
		data, ok := st.groups[group]
		if ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(data)
		}
		return ok
	}
	api := st.byGroupVersion[group+"/"+version]
	if api == nil {
		return false
	}
	if !api.available {
		a.host.WriteError(w, r, apierrors.NewServiceUnavailable("service unavailable"))
		return true
	}
	host, err := a.endpoint(r.Context(), api)
	if err != nil {
		a.log.Debug("aggregator: resolving a backend", "apiservice", api.apiService, "err", err)
		a.host.WriteError(w, r, apierrors.NewServiceUnavailable("service unavailable"))
		return true
	}
	ctx := r.Context()
	if strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 2 {
		// /apis/<group>/<version>, discovery: as upstream's, it must answer quickly.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, discoveryTimeout)
		defer cancel()
	}
	out := r.Clone(ctx)
	user, _ := registry.UserFrom(r.Context())
	setRemoteUser(out.Header, user)
	// The backend logs the request under the front server's audit ID (the front
	// answers with it already), so that the two logs can be joined.
	if id := w.Header().Get(auditIDHeader); id != "" {
		out.Header.Set(auditIDHeader, id)
	}
	loc := &url.URL{Scheme: "https", Host: host, Path: r.URL.Path}
	h := proxy.NewUpgradeAwareHandler(loc, api.transport, false, false, aggregatorErrorResponder{a})
	h.FlushInterval = -1
	// A redirect from the backend is refused (502), not handed to the client, as
	// upstream's aggregator does by default (--aggregator-reject-forwarding-redirect).
	h.RejectForwardingRedirects = true
	// A watch is initialized by the server it goes to, which says nothing back: as
	// upstream's aggregator, free its priority-and-fairness seat as it is handed on.
	flowcontrol.WatchInitialized(r.Context())
	h.ServeHTTP(w, out)
	return true
}

// endpoint resolves an aggregated API's Service to one of its ready endpoints.
func (a *Aggregator) endpoint(ctx context.Context, api *aggregatedAPI) (string, error) {
	svc, err := a.host.Service(ctx, api.service.Namespace, api.service.Name)
	if err != nil {
		return "", err
	}
	return a.host.ServiceEndpoint(ctx, svc, strconv.Itoa(int(*api.service.Port)), api.service.Name)
}

// setRemoteUser replaces whatever the client sent in the front-proxy headers (which it
// must not be able to forge) with the authenticated user.
func setRemoteUser(h http.Header, u registry.User) {
	for k := range h {
		if strings.EqualFold(k, RemoteUserHeader) || strings.EqualFold(k, RemoteGroupHeader) ||
			len(k) > len(RemoteExtraPrefix) && strings.EqualFold(k[:len(RemoteExtraPrefix)], RemoteExtraPrefix) {
			delete(h, k) // the key as stored, canonical or not
		}
	}
	h.Set(RemoteUserHeader, u.Name)
	for _, g := range u.Groups {
		h.Add(RemoteGroupHeader, g)
	}
	for k, values := range u.Extra {
		for _, v := range values {
			h.Add(RemoteExtraPrefix+url.PathEscape(k), v)
		}
	}
}

type aggregatorErrorResponder struct{ a *Aggregator }

// Error answers a failed proxy as upstream's aggregator does: 503.
func (e aggregatorErrorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e.a.log.Debug("aggregator: proxying", "path", r.URL.Path, "err", err)
	e.a.host.WriteError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
}

// buildDiscovery merges the aggregated group versions into the server's own /apis
// documents: groups after the local ones by descending priority then name, versions by
// descending version priority then Kubernetes version order.
func (a *Aggregator) buildDiscovery(st *aggregatedState) {
	type group struct {
		name     string
		priority int32
		apis     []*aggregatedAPI
	}
	byName := map[string]*group{}
	var groups []*group
	for _, api := range st.byGroupVersion {
		g := byName[api.group]
		if g == nil {
			g = &group{name: api.group}
			byName[api.group] = g
			groups = append(groups, g)
		}
		g.priority = max(g.priority, api.groupPriority)
		g.apis = append(g.apis, api)
	}
	sort.Slice(groups, func(i, j int) bool {
		if groups[i].priority != groups[j].priority {
			return groups[i].priority > groups[j].priority
		}
		return groups[i].name < groups[j].name
	})

	localGroups, localAggregated := a.host.LocalDiscovery()
	var groupList metav1.APIGroupList
	_ = json.Unmarshal(localGroups, &groupList)
	var aggList apidiscoveryv2.APIGroupDiscoveryList
	_ = json.Unmarshal(localAggregated, &aggList)
	for _, g := range groups {
		sort.Slice(g.apis, func(i, j int) bool {
			if g.apis[i].versionPriority != g.apis[j].versionPriority {
				return g.apis[i].versionPriority > g.apis[j].versionPriority
			}
			// Kubernetes version order (v2 > v1 > v1beta1), the first kept on a tie.
			return versioninfo.CompareKubeAwareVersionStrings(g.apis[j].version, g.apis[i].version) <= 0
		})
		apiGroup := metav1.APIGroup{Name: g.name}
		agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, api := range g.apis {
			apiGroup.Versions = append(apiGroup.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + api.version, Version: api.version})
			if api.resources != nil {
				agg.Versions = append(agg.Versions, versionDiscovery(api))
			}
		}
		apiGroup.PreferredVersion = apiGroup.Versions[0]
		groupList.Groups = append(groupList.Groups, apiGroup)
		single := apiGroup
		single.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		st.groups[g.name], _ = json.Marshal(&single)
		if len(agg.Versions) > 0 {
			aggList.Items = append(aggList.Items, agg)
		}
	}
	st.groupList, _ = json.Marshal(&groupList)
	st.aggGroups, _ = json.Marshal(&aggList)
}

// versionDiscovery turns a backend's APIResourceList into an aggregated discovery
// version: subresources ("pods/log") go under their resource.
func versionDiscovery(api *aggregatedAPI) apidiscoveryv2.APIVersionDiscovery {
	vd := apidiscoveryv2.APIVersionDiscovery{Version: api.version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
	if !api.fresh {
		vd.Freshness = apidiscoveryv2.DiscoveryFreshnessStale
	}
	index := map[string]int{}
	kind := func(r metav1.APIResource) *metav1.GroupVersionKind {
		gvk := &metav1.GroupVersionKind{Group: api.group, Version: api.version, Kind: r.Kind}
		if r.Group != "" || r.Version != "" {
			gvk.Group, gvk.Version = r.Group, r.Version
		}
		return gvk
	}
	for _, r := range api.resources.APIResources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		index[r.Name] = len(vd.Resources)
		vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource: r.Name, ResponseKind: kind(r), Scope: scope, SingularResource: r.SingularName,
			Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories,
		})
	}
	for _, r := range api.resources.APIResources {
		parent, sub, ok := strings.Cut(r.Name, "/")
		i, known := index[parent]
		if !ok || !known {
			continue
		}
		vd.Resources[i].Subresources = append(vd.Resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource: sub, ResponseKind: kind(r), Verbs: r.Verbs,
		})
	}
	sort.SliceStable(vd.Resources, func(i, j int) bool { return vd.Resources[i].Resource < vd.Resources[j].Resource })
	return vd
}

// DiscoveryRoot is /apis (legacy or aggregated) with the aggregated groups, or nil
// when there are none.
func (a *Aggregator) DiscoveryRoot(aggregated bool) []byte {
	st := a.current()
	if st == nil || len(st.byGroupVersion) == 0 {
		return nil
	}
	if aggregated {
		return st.aggGroups
	}
	return st.groupList
}
