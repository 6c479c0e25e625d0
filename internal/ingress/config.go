package ingress

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// config is one immutable configuration of the proxy: the routes, every backend
// resolved to its ready endpoints, and the certificates by host. Requests read the
// current one through an atomic pointer; a change builds a new one and swaps it, so a
// request in flight finishes on the configuration it started with.
type config struct {
	routes    *Routes
	upstreams map[upstreamKey]*upstream
	certs     map[string]*tls.Certificate // exact or "*.suffix" hosts, lower case
	fallback  *tls.Certificate
}

type upstreamKey struct {
	namespace, service, portName string
	port                         int32
}

func keyOf(b Backend) upstreamKey {
	return upstreamKey{b.Namespace, b.Service, b.Port.Name, b.Port.Number}
}

// upstream is a backend's ready endpoints ("ip:port"), taken in turn. The turn
// counter outlives configurations, so frequent rebuilds do not skew the rotation.
type upstream struct {
	addrs []string
	next  *atomic.Uint64
}

// pick returns the next endpoint, round-robin, or false when none is ready.
func (u *upstream) pick() (string, bool) {
	if u == nil || len(u.addrs) == 0 || u.next == nil {
		return "", false
	}
	n := u.next.Add(1) - 1
	return u.addrs[n%uint64(len(u.addrs))], true
}

// certificate returns the certificate for an SNI name: an exact host, else a wildcard
// matching its first label, else the default certificate.
func (c *config) certificate(serverName string) *tls.Certificate {
	name := strings.ToLower(strings.TrimSuffix(serverName, "."))
	if cert := c.certs[name]; cert != nil {
		return cert
	}
	if i := strings.IndexByte(name, '.'); i > 0 {
		if cert := c.certs["*"+name[i:]]; cert != nil {
			return cert
		}
	}
	return c.fallback
}

// state is what a configuration is built from: the Ingresses this controller serves
// and lookups into the informers' caches.
type state struct {
	ingresses []*networkingv1.Ingress
	service   func(namespace, name string) (*corev1.Service, error)
	slices    func(namespace, service string) ([]*discoveryv1.EndpointSlice, error)
	secret    func(namespace, name string) (*corev1.Secret, error)
	// keyPair parses a Secret's tls.crt and tls.key (cached by the caller).
	keyPair func(*corev1.Secret) (*tls.Certificate, error)
	// counters are the backends' round-robin positions, carried from the last
	// configuration; build adds and drops entries.
	counters map[upstreamKey]*atomic.Uint64
}

// problem is something an Ingress asks for that cannot be served as asked, reported as
// a Warning event on it.
type problem struct {
	ingress *networkingv1.Ingress
	reason  string
	message string
}

// build resolves st into a configuration, with the problems it met on the way.
func build(st state, fallback *tls.Certificate) (*config, []problem) {
	cfg := &config{
		routes:    BuildRoutes(st.ingresses),
		upstreams: map[upstreamKey]*upstream{},
		certs:     map[string]*tls.Certificate{},
		fallback:  fallback,
	}
	var problems []problem
	byName := map[string]*networkingv1.Ingress{}
	for _, ing := range st.ingresses {
		byName[ing.Namespace+"/"+ing.Name] = ing
	}
	for _, b := range cfg.routes.backends() {
		k := keyOf(b)
		if _, done := cfg.upstreams[k]; done {
			continue
		}
		addrs, err := resolve(st, b)
		if err != nil {
			problems = append(problems, problem{byName[b.Ingress], "BackendUnavailable", err.Error()})
		}
		next := st.counters[k]
		if next == nil {
			next = new(atomic.Uint64)
		}
		cfg.upstreams[k] = &upstream{addrs: addrs, next: next}
	}
	if st.counters != nil {
		for k := range st.counters {
			if cfg.upstreams[k] == nil {
				delete(st.counters, k)
			}
		}
		for k, u := range cfg.upstreams {
			st.counters[k] = u.next
		}
	}
	for _, ing := range sortedIngresses(st.ingresses) {
		if resourceBackend(ing) {
			problems = append(problems, problem{ing, "UnsupportedBackend", "resource backends are not supported; only service backends are served"})
		}
		for _, t := range ing.Spec.TLS {
			hosts := t.Hosts
			if len(hosts) == 0 {
				for _, r := range ing.Spec.Rules {
					if r.Host != "" {
						hosts = append(hosts, r.Host)
					}
				}
			}
			cert, err := secretCert(st, ing.Namespace, t.SecretName)
			if err != nil {
				problems = append(problems, problem{ing, "TLSSecretInvalid",
					fmt.Sprintf("%v; serving %s with the default certificate", err, strings.Join(hosts, ", "))})
				continue
			}
			for _, h := range hosts {
				h = strings.ToLower(h)
				if _, taken := cfg.certs[h]; !taken {
					cfg.certs[h] = cert
				}
			}
		}
	}
	return cfg, problems
}

func secretCert(st state, namespace, name string) (*tls.Certificate, error) {
	if name == "" {
		return nil, fmt.Errorf("a TLS entry names no secret")
	}
	s, err := st.secret(namespace, name)
	if err != nil || s == nil {
		return nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	cert, err := st.keyPair(s)
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s holds no usable certificate: %v", namespace, name, err)
	}
	return cert, nil
}

// resolve finds a backend's ready endpoints: the Service port named or numbered by the
// backend, then, in the Service's EndpointSlices, the port of the same name (which the
// EndpointSlice controller resolved from the targetPort, per pod) at every ready
// endpoint. The proxy dials them directly, never the ClusterIP.
func resolve(st state, b Backend) ([]string, error) {
	svc, err := st.service(b.Namespace, b.Service)
	if err != nil || svc == nil {
		return nil, fmt.Errorf("service %s/%s not found", b.Namespace, b.Service)
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if (b.Port.Name != "" && p.Name == b.Port.Name) || (b.Port.Name == "" && p.Port == b.Port.Number) {
			sp = p
			break
		}
	}
	if sp == nil {
		return nil, fmt.Errorf("service %s/%s has no port %s", b.Namespace, b.Service, portString(b.Port))
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return []string{net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(sp.Port)))}, nil
	}
	slices, err := st.slices(b.Namespace, b.Service)
	if err != nil {
		return nil, err
	}
	var addrs []string
	seen := map[string]bool{}
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			tcp := p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP
			if name == sp.Name && tcp && p.Port != nil {
				port = *p.Port
				break
			}
		}
		if port == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready != nil && !*e.Conditions.Ready) || len(e.Addresses) == 0 {
				continue
			}
			a := net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(port)))
			if !seen[a] {
				seen[a] = true
				addrs = append(addrs, a)
			}
		}
	}
	return addrs, nil
}

func portString(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return strconv.Quote(p.Name)
	}
	return strconv.Itoa(int(p.Number))
}

// backends lists every backend the routes can send to.
func (r *Routes) backends() []Backend {
	var out []Backend
	if r.fallback != nil {
		out = append(out, *r.fallback)
	}
	for _, s := range r.servers() {
		if s.fallback != nil {
			out = append(out, *s.fallback)
		}
		for _, p := range s.paths {
			out = append(out, p.backend)
		}
	}
	return out
}

func resourceBackend(ing *networkingv1.Ingress) bool {
	if b := ing.Spec.DefaultBackend; b != nil && b.Resource != nil {
		return true
	}
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			if p.Backend.Resource != nil {
				return true
			}
		}
	}
	return false
}
