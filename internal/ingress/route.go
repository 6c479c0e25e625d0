package ingress

import (
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// Backend names where a matched request goes: a Service port in the Ingress's namespace.
type Backend struct {
	Namespace string
	Service   string
	Port      networkingv1.ServiceBackendPort
	// Ingress is namespace/name of the Ingress the rule came from.
	Ingress string
}

// Routes is the routing decision of a set of Ingresses, built once per configuration
// and read by every request: hosts to their path lists, and the default backend.
type Routes struct {
	exact    map[string]*server
	wildcard map[string]*server // keyed by the suffix after "*", e.g. ".example.com"
	catchAll *server            // rules without a host
	// fallback is the default backend of the oldest Ingress that has one.
	fallback *Backend
}

// server is what one host serves: its paths, longest first, and the default backend
// of the (oldest) Ingress defining the host that has one.
type server struct {
	paths    []route
	fallback *Backend
}

type route struct {
	path    string
	exact   bool
	backend Backend
}

// BuildRoutes merges ings into one routing table, as ingress-nginx does: rules are
// grouped by host; of two Ingresses claiming the same host, path and type, the older
// (by creation time, then namespace/name) wins. Hosts are compared case-insensitively.
func BuildRoutes(ings []*networkingv1.Ingress) *Routes {
	ings = sortedIngresses(ings)
	r := &Routes{exact: map[string]*server{}, wildcard: map[string]*server{}}
	seen := map[string]bool{} // host, path type and path already routed
	for _, ing := range ings {
		var def *Backend
		if b := backendOf(ing, ing.Spec.DefaultBackend); b != nil {
			def = b
			if r.fallback == nil {
				r.fallback = b
			}
		}
		for _, rule := range ing.Spec.Rules {
			host := strings.ToLower(rule.Host)
			s := r.serverFor(host)
			if s.fallback == nil && def != nil && host != "" {
				s.fallback = def
			}
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				b := backendOf(ing, &p.Backend)
				if b == nil {
					continue
				}
				path := p.Path
				if path == "" {
					path = "/"
				}
				exact := p.PathType != nil && *p.PathType == networkingv1.PathTypeExact
				if !exact {
					path = normalizePrefix(path)
				}
				id := host + "\x00" + path
				if exact {
					id += "\x00exact"
				}
				if seen[id] {
					continue
				}
				seen[id] = true
				s.paths = append(s.paths, route{path: path, exact: exact, backend: *b})
			}
		}
	}
	for _, s := range r.servers() {
		sortPaths(s.paths)
	}
	return r
}

// sortedIngresses orders Ingresses oldest first, then by namespace/name: the order in
// which they claim hosts, paths and certificates.
func sortedIngresses(ings []*networkingv1.Ingress) []*networkingv1.Ingress {
	ings = append([]*networkingv1.Ingress(nil), ings...)
	sort.SliceStable(ings, func(i, j int) bool {
		a, b := ings[i], ings[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return ings
}

func (r *Routes) serverFor(host string) *server {
	m, key := r.exact, host
	switch {
	case host == "":
		if r.catchAll == nil {
			r.catchAll = &server{}
		}
		return r.catchAll
	case strings.HasPrefix(host, "*."):
		m, key = r.wildcard, host[1:]
	}
	s := m[key]
	if s == nil {
		s = &server{}
		m[key] = s
	}
	return s
}

func (r *Routes) servers() []*server {
	var out []*server
	for _, s := range r.exact {
		out = append(out, s)
	}
	for _, s := range r.wildcard {
		out = append(out, s)
	}
	if r.catchAll != nil {
		out = append(out, r.catchAll)
	}
	return out
}

// sortPaths orders paths as the API reference asks: the longest path first and, for
// two of the same length, Exact before Prefix.
func sortPaths(paths []route) {
	sort.SliceStable(paths, func(i, j int) bool {
		if len(paths[i].path) != len(paths[j].path) {
			return len(paths[i].path) > len(paths[j].path)
		}
		return paths[i].exact && !paths[j].exact
	})
}

func backendOf(ing *networkingv1.Ingress, b *networkingv1.IngressBackend) *Backend {
	if b == nil || b.Service == nil {
		return nil
	}
	return &Backend{Namespace: ing.Namespace, Service: b.Service.Name, Port: b.Service.Port, Ingress: ing.Namespace + "/" + ing.Name}
}

// Match picks the backend of a request for host (a Host header, with or without a
// port) and path. The most specific host decides alone, as in ingress-nginx, where
// each host is a server: an exact host, else a wildcard matching its first label, else
// the rules without a host. Within it the longest matching path wins; a request no
// path matches goes to the host's default backend, else the cluster-wide one.
func (r *Routes) Match(host, path string) (Backend, bool) {
	host = strings.ToLower(stripPort(host))
	s := r.exact[host]
	if s == nil {
		if i := strings.IndexByte(host, '.'); i > 0 {
			s = r.wildcard[host[i:]]
		}
	}
	if s == nil {
		s = r.catchAll
	}
	if s != nil {
		for _, p := range s.paths {
			if p.matches(path) {
				return p.backend, true
			}
		}
		if s.fallback != nil {
			return *s.fallback, true
		}
	}
	if r.fallback != nil {
		return *r.fallback, true
	}
	return Backend{}, false
}

func (p route) matches(path string) bool {
	if p.exact {
		return path == p.path
	}
	return prefixMatch(p.path, path)
}

// prefixMatch is the API reference's Prefix: the path split by "/" and compared
// element by element, so /foo/bar matches /foo/bar, /foo/bar/ and /foo/bar/baz but not
// /foo/barbaz. prefix is normalized (no trailing slash, except "/").
func prefixMatch(prefix, path string) bool {
	if prefix == "/" {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// normalizePrefix drops a Prefix path's trailing slashes: /foo/ and /foo are the same
// prefix to the API reference.
func normalizePrefix(p string) string {
	for len(p) > 1 && strings.HasSuffix(p, "/") {
		p = p[:len(p)-1]
	}
	return p
}

func stripPort(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		return host[:i]
	}
	return host
}
