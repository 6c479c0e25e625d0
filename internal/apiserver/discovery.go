package apiserver

import (
	"encoding/json"
	"mime"
	"net/http"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	versioninfo "k8s.io/apimachinery/pkg/version"

	mizzenversion "mizzen/internal/version"
)

// KubernetesVersion is the upstream release whose API mizzen serves.
const KubernetesVersion = mizzenversion.Kubernetes

const aggregatedDiscoveryMedia = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// discoveryDocs are the discovery responses, built again whenever the custom resources
// served change.
type discoveryDocs struct {
	coreVersions []byte            // /api
	groupList    []byte            // /apis
	groups       map[string][]byte // /apis/<group>
	resources    map[string][]byte // /api/v1, /apis/<group>/<version>
	aggCore      []byte            // aggregated /api
	aggGroups    []byte            // aggregated /apis
}

// subresourceVerbs lists the subresources the server serves and their verbs.
func (s *Server) subresources(h *resourceHandler) []apidiscoveryv2.APISubresourceDiscovery {
	var subs []apidiscoveryv2.APISubresourceDiscovery
	add := func(name string, kind *metav1.GroupVersionKind, verbs ...string) {
		subs = append(subs, apidiscoveryv2.APISubresourceDiscovery{Subresource: name, ResponseKind: kind, Verbs: verbs})
	}
	own := &metav1.GroupVersionKind{Group: h.GroupVersion.Group, Version: h.GroupVersion.Version, Kind: h.Kind}
	if h.HasStatus {
		add("status", own, "get", "patch", "update")
	}
	if h.Scale != nil {
		add("scale", &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, "get", "patch", "update")
	}
	switch h.GroupVersionResource() {
	case podsGVR:
		add("binding", &metav1.GroupVersionKind{Version: "v1", Kind: "Binding"}, "create")
		add("eviction", &metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, "create")
		add("ephemeralcontainers", own, "get", "patch", "update")
		add("resize", own, "get", "patch", "update")
		add("log", own, "get")
		add("exec", &metav1.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"}, "create", "get")
		add("attach", &metav1.GroupVersionKind{Version: "v1", Kind: "PodAttachOptions"}, "create", "get")
		add("portforward", &metav1.GroupVersionKind{Version: "v1", Kind: "PodPortForwardOptions"}, "create", "get")
		add("proxy", &metav1.GroupVersionKind{Version: "v1", Kind: "PodProxyOptions"}, "create", "delete", "get", "patch", "update")
	case servicesGVR:
		add("proxy", &metav1.GroupVersionKind{Version: "v1", Kind: "ServiceProxyOptions"}, "create", "delete", "get", "patch", "update")
	case nodesGVR:
		add("proxy", &metav1.GroupVersionKind{Version: "v1", Kind: "NodeProxyOptions"}, "create", "delete", "get", "patch", "update")
	case namespacesGVR:
		add("finalize", own, "update")
	case serviceAccountsGVR:
		add("token", &metav1.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}, "create")
	case csrGVR:
		add("approval", own, "get", "patch", "update")
	}
	return subs
}

func (s *Server) buildDiscovery() *discoveryDocs {
	d := &discoveryDocs{groups: map[string][]byte{}, resources: map[string][]byte{}}
	byGV := map[string][]*resourceHandler{}
	for _, h := range s.handlers {
		gv := h.GroupVersion.String()
		byGV[gv] = append(byGV[gv], h)
	}
	groups := s.groups
	customVersions := map[string][]string{}
	var customGroups []string
	for _, h := range s.custom.all() {
		gv := h.GroupVersion.String()
		byGV[gv] = append(byGV[gv], h)
		g := h.GroupVersion.Group
		if _, ok := customVersions[g]; !ok {
			customGroups = append(customGroups, g)
		}
		if !contains(customVersions[g], h.GroupVersion.Version) {
			customVersions[g] = append(customVersions[g], h.GroupVersion.Version)
		}
	}
	// Custom resource groups come after the built-in ones, by name, as upstream lists
	// them (all with the same group priority).
	sort.Strings(customGroups)
	for _, g := range customGroups {
		groups = append(groups, groupInfo{name: g, versions: sortVersions(customVersions[g])})
	}
	verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	unstoredIn := func(gv string) []unstoredResource {
		var out []unstoredResource
		for _, c := range unstoredResources() {
			if c.gvr.GroupVersion().String() == gv {
				out = append(out, c)
			}
		}
		return out
	}
	apiResources := func(gv string) *metav1.APIResourceList {
		list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
		// Each resource comes with its subresources right after it, in name order.
		type entry struct {
			name      string
			resources []metav1.APIResource
		}
		var entries []entry
		for _, h := range byGV[gv] {
			e := entry{name: h.Resource.Resource, resources: []metav1.APIResource{{
				Name: h.Resource.Resource, SingularName: h.SingularName, Namespaced: h.Namespaced, Kind: h.Kind,
				Verbs: verbs, ShortNames: h.ShortNames, Categories: h.Categories,
			}}}
			for _, sub := range s.subresources(h) {
				e.resources = append(e.resources, metav1.APIResource{
					Name: h.Resource.Resource + "/" + sub.Subresource, Namespaced: h.Namespaced,
					Group: sub.ResponseKind.Group, Version: sub.ResponseKind.Version, Kind: sub.ResponseKind.Kind, Verbs: sub.Verbs,
				})
			}
			entries = append(entries, e)
		}
		for _, c := range unstoredIn(gv) {
			entries = append(entries, entry{name: c.gvr.Resource, resources: []metav1.APIResource{{
				Name: c.gvr.Resource, SingularName: c.singular, Namespaced: c.namespaced, Kind: c.kind, Verbs: c.verbs(),
				ShortNames: c.shortNames,
			}}})
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
		for _, e := range entries {
			list.APIResources = append(list.APIResources, e.resources...)
		}
		return list
	}
	aggGroup := func(g groupInfo) apidiscoveryv2.APIGroupDiscovery {
		out := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.name}}
		for _, v := range g.versions {
			gv := metav1.GroupVersion{Group: g.name, Version: v}.String()
			vd := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			hs := byGV[gv]
			sort.Slice(hs, func(i, j int) bool { return hs[i].Resource.Resource < hs[j].Resource.Resource })
			for _, h := range hs {
				scope := apidiscoveryv2.ScopeCluster
				if h.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
					Resource:         h.Resource.Resource,
					ResponseKind:     &metav1.GroupVersionKind{Group: g.name, Version: v, Kind: h.Kind},
					Scope:            scope,
					SingularResource: h.SingularName,
					Verbs:            verbs,
					ShortNames:       h.ShortNames,
					Categories:       h.Categories,
					Subresources:     s.subresources(h),
				})
			}
			for _, c := range unstoredIn(gv) {
				scope := apidiscoveryv2.ScopeCluster
				if c.namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				vd.Resources = append(vd.Resources, apidiscoveryv2.APIResourceDiscovery{
					Resource:         c.gvr.Resource,
					ResponseKind:     &metav1.GroupVersionKind{Group: g.name, Version: v, Kind: c.kind},
					Scope:            scope,
					SingularResource: c.singular,
					Verbs:            c.verbs(),
					ShortNames:       c.shortNames,
				})
			}
			sort.SliceStable(vd.Resources, func(i, j int) bool { return vd.Resources[i].Resource < vd.Resources[j].Resource })
			out.Versions = append(out.Versions, vd)
		}
		return out
	}
	mustJSON := func(v interface{}) []byte { b, _ := json.Marshal(v); return b }

	d.coreVersions = mustJSON(&metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: s.cfg.ExternalAddress}},
	})
	groupList := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	aggGroups := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	aggCore := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	for _, g := range groups {
		for _, v := range g.versions {
			gv := metav1.GroupVersion{Group: g.name, Version: v}.String()
			prefix := "/apis/" + gv
			if g.name == "" {
				prefix = "/api/" + v
			}
			d.resources[prefix] = mustJSON(apiResources(gv))
		}
		if g.name == "" {
			aggCore.Items = append(aggCore.Items, aggGroup(g))
			continue
		}
		group := metav1.APIGroup{Name: g.name}
		for _, v := range g.versions {
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.name + "/" + v, Version: v})
		}
		group.PreferredVersion = group.Versions[0]
		groupList.Groups = append(groupList.Groups, group)
		single := group
		single.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		d.groups["/apis/"+g.name] = mustJSON(&single)
		aggGroups.Items = append(aggGroups.Items, aggGroup(g))
	}
	d.groupList = mustJSON(groupList)
	d.aggCore = mustJSON(aggCore)
	d.aggGroups = mustJSON(aggGroups)
	return d
}

// sortVersions orders versions as Kubernetes prefers them: GA before beta before alpha,
// newer before older.
func sortVersions(vs []string) []string {
	out := append([]string(nil), vs...)
	sort.SliceStable(out, func(i, j int) bool { return versioninfo.CompareKubeAwareVersionStrings(out[i], out[j]) > 0 })
	return out
}

// wantsAggregated reports whether the client asked for aggregated discovery first.
func wantsAggregated(r *http.Request) bool {
	for _, clause := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		if params["as"] == "APIGroupDiscoveryList" && params["g"] == "apidiscovery.k8s.io" && params["v"] == "v2" && mt == mediaJSON {
			return true
		}
		if mt == mediaJSON || mt == "*/*" {
			return false
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, contentType string, data []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// serveDiscoveryRoot answers /api and /apis.
func (s *Server) serveDiscoveryRoot(w http.ResponseWriter, r *http.Request) {
	core := strings.TrimSuffix(r.URL.Path, "/") == "/api"
	if merged := s.aggregator.DiscoveryRoot(wantsAggregated(r)); !core && merged != nil {
		media := mediaJSON
		if wantsAggregated(r) {
			media = aggregatedDiscoveryMedia
		}
		writeJSON(w, media, merged)
		return
	}
	switch {
	case wantsAggregated(r) && core:
		writeJSON(w, aggregatedDiscoveryMedia, s.discovery.Load().aggCore)
	case wantsAggregated(r):
		writeJSON(w, aggregatedDiscoveryMedia, s.discovery.Load().aggGroups)
	case core:
		writeJSON(w, mediaJSON, s.discovery.Load().coreVersions)
	default:
		writeJSON(w, mediaJSON, s.discovery.Load().groupList)
	}
}

// serveDiscovery answers /apis/<group> and /api/v1, /apis/<group>/<version>; it
// reports whether the path was one of them.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if data, ok := s.discovery.Load().resources[path]; ok {
		writeJSON(w, mediaJSON, data)
		return true
	}
	if data, ok := s.discovery.Load().groups[path]; ok {
		writeJSON(w, mediaJSON, data)
		return true
	}
	return false
}

// serveVersion answers /version: the build's own stamp (commit, date, tree state) on the
// upstream release whose API it serves, which clients compare their own version with.
func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request) {
	v := version.MustParseSemantic(KubernetesVersion)
	info := mizzenversion.Get()
	info.Major, info.Minor = fmtUint(v.Major()), fmtUint(v.Minor())
	info.EmulationMajor, info.EmulationMinor = info.Major, info.Minor
	info.MinCompatibilityMajor, info.MinCompatibilityMinor = info.Major, fmtUint(v.Minor()-1)
	data, _ := json.Marshal(info)
	writeJSON(w, mediaJSON, data)
}
