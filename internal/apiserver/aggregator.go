package apiserver

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"

	apiregistrationv1 "mizzen/internal/apis/apiregistration/v1"
	"mizzen/internal/registry"
	"mizzen/internal/storage"
)

// The aggregation layer. An APIService whose spec names a Service registers an API
// group version served elsewhere (metrics.k8s.io by the metrics server): requests under
// /apis/<group>/<version> are authenticated and authorized by ServeHTTP, then proxied to a
// ready endpoint of that Service over TLS, the user passed on in front-proxy headers
// (X-Remote-User, X-Remote-Group, X-Remote-Extra-*) that the backend trusts because the
// connection presents the front-proxy client certificate. A reconcile loop keeps each
// such APIService's Available condition (upstream's checks and reasons) and fetches its
// discovery document, which /api and /apis then list beside the local groups.

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
	remoteUserHeader   = "X-Remote-User"
	remoteGroupHeader  = "X-Remote-Group"
	remoteExtraPrefix  = "X-Remote-Extra-"
	aggregatorUserName = "system:kube-aggregator"
)

var configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")

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

// aggregator runs the aggregation layer for one server.
type aggregator struct {
	s        *Server
	interval time.Duration
	state    atomic.Pointer[aggregatedState]
	// stateMu orders the writers of state.
	stateMu sync.Mutex

	// transports are kept across reconciles, by the settings they were built from.
	mu         sync.Mutex
	transports map[string]*http.Transport
}

func newAggregator(s *Server, interval time.Duration) *aggregator {
	if interval <= 0 {
		interval = defaultAggregatorInterval
	}
	return &aggregator{s: s, interval: interval, transports: map[string]*http.Transport{}}
}

// current is the state, nil before the first reconcile.
func (a *aggregator) current() *aggregatedState { return a.state.Load() }

// run reconciles every interval, and within a second of an aggregated APIService's
// spec, its Service or the Service's EndpointSlices changing, until ctx ends.
func (a *aggregator) run(ctx context.Context) {
	select {
	case <-a.s.cache.Ready():
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
			a.s.log.Warn("aggregator: listing APIServices", "err", err)
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
func (a *aggregator) listAPIServices() ([]*apiregistrationv1.APIService, error) {
	h := a.s.handlerForKind(apiregistrationv1.SchemeGroupVersion.Group, apiregistrationv1.SchemeGroupVersion.Version, "APIService")
	if h == nil {
		return nil, nil
	}
	entries, _, err := a.s.cache.List(h.segment, h.listPrefix(""), nil)
	if err != nil {
		return nil, err
	}
	var out []*apiregistrationv1.APIService
	for _, e := range entries {
		obj, err := h.present(e.Object)
		if err != nil {
			return nil, err
		}
		svc, ok := obj.(*apiregistrationv1.APIService)
		if !ok || svc.Spec.Service == nil || a.s.servesGroup(svc.Spec.Group) {
			continue
		}
		out = append(out, svc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// servesGroup reports whether this server serves a version of the group itself.
func (s *Server) servesGroup(group string) bool {
	for _, g := range s.groups {
		if g.name == group {
			return true
		}
	}
	return false
}

// fingerprint changes whenever an aggregated APIService is added, removed or has its
// spec changed, or the Service it names or that Service's EndpointSlices change; not on
// status writes, which the reconcile makes itself. It reads only the watch cache.
func (a *aggregator) fingerprint(services []*apiregistrationv1.APIService) string {
	var b strings.Builder
	sh, eh := a.s.handlers[servicesGVR], a.s.handlers[endpointSlicesGVR]
	for _, svc := range services {
		spec, _ := json.Marshal(svc.Spec)
		fmt.Fprintf(&b, "%s=%s", svc.Name, spec)
		ref := svc.Spec.Service
		if sh != nil {
			if e, _, err := a.s.cache.Get(sh.segment, sh.key(ref.Namespace, ref.Name)); err == nil && e != nil {
				fmt.Fprintf(&b, " service@%d", e.RV)
			}
		}
		if eh != nil {
			entries, _, _ := a.s.cache.List(eh.segment, eh.listPrefix(ref.Namespace), func(e *storage.Entry) bool {
				return e.Labels[discoveryv1.LabelServiceName] == ref.Name
			})
			for _, e := range entries {
				fmt.Fprintf(&b, " slice@%d", e.RV)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// reconcile checks every aggregated APIService, records its Available condition and
// discovery, and publishes the new state.
func (a *aggregator) reconcile(ctx context.Context, services []*apiregistrationv1.APIService) {
	prev := a.current()
	next := &aggregatedState{byGroupVersion: map[string]*aggregatedAPI{}, groups: map[string][]byte{}}
	inUse := map[string]bool{}
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
			a.setAvailable(ctx, svc, apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error())
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
		a.setAvailable(ctx, svc, status, reason, message)
		next.byGroupVersion[api.group+"/"+api.version] = api
	}
	a.closeTransports(inUse)
	a.stateMu.Lock()
	a.buildDiscovery(next)
	a.state.Store(next)
	a.stateMu.Unlock()
}

// localChanged merges the aggregated groups into the server's own discovery again,
// after the resources it serves itself changed (a CRD was established or removed).
func (a *aggregator) localChanged() {
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
func (a *aggregator) check(ctx context.Context, api *aggregatedAPI) (apiregistrationv1.ConditionStatus, string, string) {
	ref := api.service
	sh := a.s.handlers[servicesGVR]
	if sh == nil {
		return apiregistrationv1.ConditionFalse, "ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace)
	}
	obj, err := a.s.getObject(ctx, sh, ref.Namespace, ref.Name, "")
	if apierrors.IsNotFound(err) {
		return apiregistrationv1.ConditionFalse, "ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", ref.Name, ref.Namespace)
	}
	if err != nil {
		return apiregistrationv1.ConditionUnknown, "ServiceAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
	}
	svc := obj.(*corev1.Service)
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
	slices, err := a.s.serviceEndpointSlices(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return apiregistrationv1.ConditionUnknown, "EndpointsAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", ref.Name, ref.Namespace, err)
	}
	if len(slices) == 0 {
		return apiregistrationv1.ConditionFalse, "EndpointsNotFound", fmt.Sprintf("cannot find endpointslices for service/%s in %q", ref.Name, ref.Namespace)
	}
	host, err := a.s.serviceEndpoint(ctx, svc, portName, ref.Name, false)
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
func (a *aggregator) fetchDiscovery(ctx context.Context, transport *http.Transport, u *url.URL) (*metav1.APIResourceList, error) {
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
func (a *aggregator) setAvailable(ctx context.Context, svc *apiregistrationv1.APIService, status apiregistrationv1.ConditionStatus, reason, message string) {
	for _, c := range svc.Status.Conditions {
		if c.Type == apiregistrationv1.Available && c.Status == status && c.Reason == reason && c.Message == message {
			return
		}
	}
	h := a.s.handlerForKind(apiregistrationv1.SchemeGroupVersion.Group, apiregistrationv1.SchemeGroupVersion.Version, "APIService")
	_, err := a.s.updateObject(ctx, h, "", svc.Name, updateStatus, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*apiregistrationv1.APIService)
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
		return cur, nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		a.s.log.Warn("aggregator: updating APIService status", "apiservice", svc.Name, "err", err)
		return
	}
	a.s.log.Info("aggregated API availability", "apiservice", svc.Name, "status", status, "reason", reason, "message", message)
}

// transportFor is the transport to an APIService's Service: the front-proxy client
// certificate, and the serving certificate verified against spec.caBundle for the
// name <service>.<namespace>.svc unless spec.insecureSkipTLSVerify.
func (a *aggregator) transportFor(svc *apiregistrationv1.APIService) (string, *http.Transport, error) {
	ref := svc.Spec.Service
	sum := sha256.Sum256(svc.Spec.CABundle)
	key := fmt.Sprintf("%s|%s/%s|%t|%x", svc.Name, ref.Namespace, ref.Name, svc.Spec.InsecureSkipTLSVerify, sum)
	a.mu.Lock()
	defer a.mu.Unlock()
	if t, ok := a.transports[key]; ok {
		return key, t, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: ref.Name + "." + ref.Namespace + ".svc"}
	if fp := a.s.cfg.FrontProxy; fp != nil {
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
func (a *aggregator) closeTransports(keep map[string]bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, t := range a.transports {
		if !keep[k] {
			t.CloseIdleConnections()
			delete(a.transports, k)
		}
	}
}

// serve proxies a request for an aggregated group version, after authorizing a
// resource request as any other; it reports whether the path was one.
func (a *aggregator) serve(w http.ResponseWriter, r *http.Request, info *requestInfo) bool {
	st := a.current()
	if st == nil || len(st.byGroupVersion) == 0 {
		return false
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/apis/")
	if !ok {
		return false
	}
	var group, version string
	if info != nil {
		group, version = info.Group, info.Version
	} else {
		group, rest, _ = strings.Cut(strings.Trim(rest, "/"), "/")
		version, _, _ = strings.Cut(rest, "/")
	}
	if version == "" {
		// /apis/<group>: this server answers from what it learnt.
		data, ok := st.groups[group]
		if ok {
			writeJSON(w, mediaJSON, data)
		}
		return ok
	}
	api := st.byGroupVersion[group+"/"+version]
	if api == nil {
		return false
	}
	if !api.available {
		a.s.writeError(w, r, apierrors.NewServiceUnavailable("service unavailable"))
		return true
	}
	host, err := a.endpoint(r.Context(), api)
	if err != nil {
		a.s.log.Debug("aggregator: resolving a backend", "apiservice", api.apiService, "err", err)
		a.s.writeError(w, r, apierrors.NewServiceUnavailable("service unavailable"))
		return true
	}
	out := r.Clone(r.Context())
	user, _ := registry.UserFrom(r.Context())
	setRemoteUser(out.Header, user)
	loc := &url.URL{Scheme: "https", Host: host, Path: r.URL.Path}
	h := proxy.NewUpgradeAwareHandler(loc, api.transport, false, false, aggregatorErrorResponder{a.s})
	h.FlushInterval = -1
	h.ServeHTTP(w, out)
	return true
}

// endpoint resolves an aggregated API's Service to one of its ready endpoints.
func (a *aggregator) endpoint(ctx context.Context, api *aggregatedAPI) (string, error) {
	sh := a.s.handlers[servicesGVR]
	if sh == nil {
		return "", notFound()
	}
	obj, err := a.s.getObject(ctx, sh, api.service.Namespace, api.service.Name, "")
	if err != nil {
		return "", err
	}
	return a.s.serviceEndpoint(ctx, obj.(*corev1.Service), strconv.Itoa(int(*api.service.Port)), api.service.Name, false)
}

// setRemoteUser replaces whatever the client sent in the front-proxy headers (which it
// must not be able to forge) with the authenticated user.
func setRemoteUser(h http.Header, u registry.User) {
	for k := range h {
		if strings.EqualFold(k, remoteUserHeader) || strings.EqualFold(k, remoteGroupHeader) ||
			len(k) > len(remoteExtraPrefix) && strings.EqualFold(k[:len(remoteExtraPrefix)], remoteExtraPrefix) {
			delete(h, k) // the key as stored, canonical or not
		}
	}
	h.Set(remoteUserHeader, u.Name)
	for _, g := range u.Groups {
		h.Add(remoteGroupHeader, g)
	}
	for k, values := range u.Extra {
		for _, v := range values {
			h.Add(remoteExtraPrefix+url.PathEscape(k), v)
		}
	}
}

type aggregatorErrorResponder struct{ s *Server }

// Error answers a failed proxy as upstream's aggregator does: 503.
func (e aggregatorErrorResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	e.s.log.Debug("aggregator: proxying", "path", r.URL.Path, "err", err)
	e.s.writeError(w, r, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
}

// buildDiscovery merges the aggregated group versions into the server's own /apis
// documents: groups after the local ones by descending priority then name, versions by
// descending version priority then Kubernetes version order.
func (a *aggregator) buildDiscovery(st *aggregatedState) {
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

	var groupList metav1.APIGroupList
	_ = json.Unmarshal(a.s.discovery.Load().groupList, &groupList)
	var aggList apidiscoveryv2.APIGroupDiscoveryList
	_ = json.Unmarshal(a.s.discovery.Load().aggGroups, &aggList)
	for _, g := range groups {
		sort.Slice(g.apis, func(i, j int) bool {
			if g.apis[i].versionPriority != g.apis[j].versionPriority {
				return g.apis[i].versionPriority > g.apis[j].versionPriority
			}
			return sortVersions([]string{g.apis[i].version, g.apis[j].version})[0] == g.apis[i].version
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

// discoveryRoot is /apis (legacy or aggregated) with the aggregated groups, or nil
// when there are none.
func (a *aggregator) discoveryRoot(aggregated bool) []byte {
	st := a.current()
	if st == nil || len(st.byGroupVersion) == 0 {
		return nil
	}
	if aggregated {
		return st.aggGroups
	}
	return st.groupList
}

// publishAuthenticationInfo writes kube-system/extension-apiserver-authentication, the
// ConfigMap from which aggregated servers learn which CAs and names to trust, as
// upstream's apiserver keeps it.
func (s *Server) publishAuthenticationInfo(ctx context.Context) error {
	h := s.handlers[configMapsGVR]
	if h == nil || (s.cfg.FrontProxy == nil && len(s.cfg.ClientCAPEM) == 0) {
		return nil
	}
	data := map[string]string{}
	if len(s.cfg.ClientCAPEM) > 0 {
		data["client-ca-file"] = string(s.cfg.ClientCAPEM)
	}
	if fp := s.cfg.FrontProxy; fp != nil {
		jsonList := func(v []string) string {
			if v == nil {
				v = []string{}
			}
			b, _ := json.Marshal(v)
			return string(b)
		}
		data["requestheader-client-ca-file"] = string(fp.CAPEM)
		data["requestheader-allowed-names"] = jsonList(fp.AllowedNames)
		data["requestheader-username-headers"] = jsonList([]string{remoteUserHeader})
		data["requestheader-group-headers"] = jsonList([]string{remoteGroupHeader})
		data["requestheader-extra-headers-prefix"] = jsonList([]string{remoteExtraPrefix})
	}
	const namespace, name = "kube-system", "extension-apiserver-authentication"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: data}
	existing, err := s.getObject(ctx, h, namespace, name, "")
	switch {
	case apierrors.IsNotFound(err):
		_, err = s.createObject(ctx, h, namespace, cm, false, nil)
		return err
	case err != nil:
		return err
	case maps.Equal(existing.(*corev1.ConfigMap).Data, data):
		return nil
	}
	_, err = s.updateObject(ctx, h, namespace, name, updateMain, false, nil, func(current runtime.Object) (runtime.Object, error) {
		cur := current.(*corev1.ConfigMap)
		cur.Data = data
		return cur, nil
	})
	return err
}
