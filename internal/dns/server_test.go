package dns

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	miekg "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// clusterObjects is the cluster every query test runs against.
func clusterObjects() []runtime.Object {
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	return []runtime.Object{
		namespace("default"), namespace("kube-system"), namespace("quiet"),
		service("kube-system", "kube-dns", v1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []v1.ServicePort{port("dns", udp, 53), port("dns-tcp", tcp, 53)}}),
		service("default", "web", v1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []v1.ServicePort{port("http", tcp, 80), port("dns", udp, 53)}}),
		slice("default", "web-abc", "web", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("http", tcp, 8080)},
			testEndpoint{addr: "10.1.2.3"}),
		service("default", "dual", v1.ServiceSpec{ClusterIPs: []string{"10.96.0.21", "fd00::21"}, Ports: []v1.ServicePort{port("http", tcp, 80)}}),
		service("default", "v6only", v1.ServiceSpec{ClusterIPs: []string{"fd00::22"}, Ports: []v1.ServicePort{port("http", tcp, 80)}}),
		service("default", "db", v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{port("pg", tcp, 5432)}}),
		slice("default", "db-abc", "db", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("pg", tcp, 5432)},
			testEndpoint{addr: "10.1.0.5", hostname: "db-0"},
			testEndpoint{addr: "10.1.0.6", hostname: "db-1"},
			testEndpoint{addr: "10.1.0.7"},
			testEndpoint{addr: "10.1.0.8", hostname: "db-3", notReady: true}),
		service("default", "eager", v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, PublishNotReadyAddresses: true, Ports: []v1.ServicePort{port("http", tcp, 80)}}),
		slice("default", "eager-abc", "eager", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("http", tcp, 80)},
			testEndpoint{addr: "10.1.1.5", notReady: true}),
		service("default", "lonely", v1.ServiceSpec{ClusterIP: v1.ClusterIPNone}),
		service("default", "ext", v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "external.example.org"}),
		service("default", "alias", v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "web.default.svc.cluster.local"}),
	}
}

func TestQueries(t *testing.T) {
	s, _ := startServer(t, clusterObjects()...)
	const (
		web = "web.default.svc.cluster.local."
		db  = "db.default.svc.cluster.local."
	)
	soa := []string{"cluster.local. SOA ns.dns.cluster.local. hostmaster.cluster.local."}
	tests := []struct {
		name      string
		qname     string
		qtype     uint16
		rcode     int
		answer    []string
		extra     []string
		negative  bool // the SOA is in the authority section
		forwarded bool // answered upstream: not authoritative, upstream's TTLs
	}{
		// Services with a cluster IP.
		{name: "service A", qname: web, qtype: miekg.TypeA, answer: []string{web + " A 10.96.0.20"}},
		{name: "the asker's case is kept", qname: "Web.DEFAULT.svc.Cluster.Local.", qtype: miekg.TypeA,
			answer: []string{"Web.DEFAULT.svc.Cluster.Local. A 10.96.0.20"}},
		{name: "AAAA of an IPv4 service is NODATA", qname: web, qtype: miekg.TypeAAAA, negative: true},
		{name: "TXT of a service is NODATA", qname: web, qtype: miekg.TypeTXT, negative: true},
		{name: "dual-stack A", qname: "dual.default.svc.cluster.local.", qtype: miekg.TypeA, answer: []string{"dual.default.svc.cluster.local. A 10.96.0.21"}},
		{name: "dual-stack AAAA", qname: "dual.default.svc.cluster.local.", qtype: miekg.TypeAAAA, answer: []string{"dual.default.svc.cluster.local. AAAA fd00::21"}},
		{name: "A of an IPv6 service is NODATA", qname: "v6only.default.svc.cluster.local.", qtype: miekg.TypeA, negative: true},
		{name: "no such service", qname: "missing.default.svc.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "a service in another namespace", qname: "web.quiet.svc.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "an endpoint of a cluster IP service", qname: "10-1-2-3." + web, qtype: miekg.TypeA, answer: []string{"10-1-2-3." + web + " A 10.1.2.3"}},

		// SRV.
		{name: "SRV of a named port", qname: "_http._tcp." + web, qtype: miekg.TypeSRV,
			answer: []string{"_http._tcp." + web + " SRV 0 100 80 " + web}, extra: []string{web + " A 10.96.0.20"}},
		{name: "SRV of a UDP port", qname: "_dns._udp." + web, qtype: miekg.TypeSRV,
			answer: []string{"_dns._udp." + web + " SRV 0 100 53 " + web}, extra: []string{web + " A 10.96.0.20"}},
		{name: "SRV without underscores", qname: "http.tcp." + web, qtype: miekg.TypeSRV,
			answer: []string{"http.tcp." + web + " SRV 0 100 80 " + web}, extra: []string{web + " A 10.96.0.20"}},
		{name: "SRV of the service: every port", qname: web, qtype: miekg.TypeSRV,
			answer: []string{web + " SRV 0 50 53 " + web, web + " SRV 0 50 80 " + web}, extra: []string{web + " A 10.96.0.20"}},
		{name: "SRV of a port with the wrong protocol", qname: "_http._udp." + web, qtype: miekg.TypeSRV, rcode: miekg.RcodeNameError, negative: true},
		{name: "SRV of a port that does not exist", qname: "_https._tcp." + web, qtype: miekg.TypeSRV, rcode: miekg.RcodeNameError, negative: true},
		{name: "A of an SRV name", qname: "_http._tcp." + web, qtype: miekg.TypeA, answer: []string{"_http._tcp." + web + " A 10.96.0.20"}},

		// Headless services.
		{name: "headless A: the ready endpoints", qname: db, qtype: miekg.TypeA,
			answer: []string{db + " A 10.1.0.5", db + " A 10.1.0.6", db + " A 10.1.0.7"}},
		{name: "headless endpoint by hostname", qname: "db-0." + db, qtype: miekg.TypeA, answer: []string{"db-0." + db + " A 10.1.0.5"}},
		{name: "headless endpoint without hostname, by dashed address", qname: "10-1-0-7." + db, qtype: miekg.TypeA,
			answer: []string{"10-1-0-7." + db + " A 10.1.0.7"}},
		{name: "a not-ready endpoint has no name", qname: "db-3." + db, qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "headless SRV: one per endpoint, to its name", qname: "_pg._tcp." + db, qtype: miekg.TypeSRV,
			answer: []string{
				"_pg._tcp." + db + " SRV 0 33 5432 10-1-0-7." + db,
				"_pg._tcp." + db + " SRV 0 33 5432 db-0." + db,
				"_pg._tcp." + db + " SRV 0 33 5432 db-1." + db,
			},
			extra: []string{"10-1-0-7." + db + " A 10.1.0.7", "db-0." + db + " A 10.1.0.5", "db-1." + db + " A 10.1.0.6"}},
		{name: "SRV of one endpoint", qname: "db-1." + db, qtype: miekg.TypeSRV,
			answer: []string{"db-1." + db + " SRV 0 100 5432 db-1." + db}, extra: []string{"db-1." + db + " A 10.1.0.6"}},
		{name: "publishNotReadyAddresses publishes a not-ready endpoint", qname: "eager.default.svc.cluster.local.", qtype: miekg.TypeA,
			answer: []string{"eager.default.svc.cluster.local. A 10.1.1.5"}},
		{name: "headless service without endpoints", qname: "lonely.default.svc.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},

		// ExternalName.
		{name: "ExternalName CNAME", qname: "ext.default.svc.cluster.local.", qtype: miekg.TypeCNAME,
			answer: []string{"ext.default.svc.cluster.local. CNAME external.example.org."}},
		{name: "ExternalName A follows the CNAME upstream", qname: "ext.default.svc.cluster.local.", qtype: miekg.TypeA,
			answer: []string{"ext.default.svc.cluster.local. CNAME external.example.org.", "external.example.org. A 198.51.100.7"}},
		{name: "ExternalName A follows the CNAME into the cluster", qname: "alias.default.svc.cluster.local.", qtype: miekg.TypeA,
			answer: []string{"alias.default.svc.cluster.local. CNAME " + web, web + " A 10.96.0.20"}},
		{name: "ExternalName SRV is NODATA", qname: "ext.default.svc.cluster.local.", qtype: miekg.TypeSRV, negative: true},

		// The zone's structure.
		{name: "a namespace is a name", qname: "default.svc.cluster.local.", qtype: miekg.TypeA, negative: true},
		{name: "a namespace without services is a name", qname: "quiet.svc.cluster.local.", qtype: miekg.TypeA, negative: true},
		{name: "a namespace that does not exist", qname: "nowhere.svc.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "svc.<zone> is a name", qname: "svc.cluster.local.", qtype: miekg.TypeA, negative: true},
		{name: "a name outside the scheme", qname: "foo.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "too many labels", qname: "a.b.c." + web, qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "apex SOA", qname: "cluster.local.", qtype: miekg.TypeSOA, answer: soa},
		{name: "apex NS", qname: "cluster.local.", qtype: miekg.TypeNS,
			answer: []string{"cluster.local. NS ns.dns.cluster.local."}, extra: []string{"ns.dns.cluster.local. A 10.96.0.10"}},
		{name: "apex A is NODATA", qname: "cluster.local.", qtype: miekg.TypeA, negative: true},
		{name: "the nameserver's address", qname: "ns.dns.cluster.local.", qtype: miekg.TypeA, answer: []string{"ns.dns.cluster.local. A 10.96.0.10"}},
		{name: "schema version", qname: "dns-version.cluster.local.", qtype: miekg.TypeTXT, answer: []string{`dns-version.cluster.local. TXT "1.1.0"`}},

		// Pods ("pods insecure": the address is read from the name).
		{name: "pod A", qname: "10-1-2-9.default.pod.cluster.local.", qtype: miekg.TypeA, answer: []string{"10-1-2-9.default.pod.cluster.local. A 10.1.2.9"}},
		{name: "pod AAAA of an IPv4 pod is NODATA", qname: "10-1-2-9.default.pod.cluster.local.", qtype: miekg.TypeAAAA, negative: true},
		{name: "IPv6 pod", qname: "fd00--9.default.pod.cluster.local.", qtype: miekg.TypeAAAA, answer: []string{"fd00--9.default.pod.cluster.local. AAAA fd00::9"}},
		{name: "pod name that is no address", qname: "web.default.pod.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},
		{name: "pod in a namespace that does not exist", qname: "10-1-2-9.nowhere.pod.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, negative: true},

		// Reverse lookups.
		{name: "PTR of a cluster IP", qname: "20.0.96.10.in-addr.arpa.", qtype: miekg.TypePTR, answer: []string{"20.0.96.10.in-addr.arpa. PTR " + web}},
		{name: "PTR of an IPv6 cluster IP", qname: reverseName(netip.MustParseAddr("fd00::21")), qtype: miekg.TypePTR,
			answer: []string{reverseName(netip.MustParseAddr("fd00::21")) + " PTR dual.default.svc.cluster.local."}},
		{name: "PTR of a headless endpoint with a hostname", qname: "5.0.1.10.in-addr.arpa.", qtype: miekg.TypePTR, answer: []string{"5.0.1.10.in-addr.arpa. PTR db-0." + db}},
		{name: "PTR of a headless endpoint without one", qname: "7.0.1.10.in-addr.arpa.", qtype: miekg.TypePTR, answer: []string{"7.0.1.10.in-addr.arpa. PTR 10-1-0-7." + db}},
		{name: "PTR of an address not in the cluster goes upstream", qname: "1.2.0.192.in-addr.arpa.", qtype: miekg.TypePTR,
			answer: []string{"1.2.0.192.in-addr.arpa. PTR host.example.com."}, forwarded: true},

		// Forwarding.
		{name: "a name outside the cluster", qname: "example.com.", qtype: miekg.TypeA, answer: []string{"example.com. A 192.0.2.1"}, forwarded: true},
		{name: "an upstream NXDOMAIN", qname: "nothing.example.net.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError, forwarded: true},
	}
	for _, network := range []string{"udp", "tcp"} {
		for _, tt := range tests {
			t.Run(network+"/"+tt.name, func(t *testing.T) {
				resp := query(t, s.Addr(), tt.qname, tt.qtype, queryOpts{network: network})
				if resp.Rcode != tt.rcode {
					t.Errorf("rcode = %s, want %s", miekg.RcodeToString[resp.Rcode], miekg.RcodeToString[tt.rcode])
				}
				var got []string
				for _, rr := range rrTexts(resp.Answer) {
					got = append(got, soaPrefix(rr))
				}
				if !slices.Equal(got, sortedCopy(tt.answer)) {
					t.Errorf("answer =\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(sortedCopy(tt.answer), "\n\t"))
				}
				if tt.extra != nil {
					if got := rrTexts(resp.Extra); !slices.Equal(got, sortedCopy(tt.extra)) {
						t.Errorf("additional =\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(sortedCopy(tt.extra), "\n\t"))
					}
				}
				if resp.Authoritative == tt.forwarded {
					t.Errorf("authoritative = %v for a forwarded = %v answer", resp.Authoritative, tt.forwarded)
				}
				if tt.forwarded {
					return
				}
				if !resp.RecursionAvailable {
					t.Error("recursion available is not set")
				}
				var authority []string
				for _, rr := range rrTexts(resp.Ns) {
					authority = append(authority, soaPrefix(rr))
				}
				if want := map[bool][]string{true: soa}[tt.negative]; !slices.Equal(authority, want) {
					t.Errorf("authority = %v, want %v", authority, want)
				}
				for _, rr := range slices.Concat(resp.Answer, resp.Ns, resp.Extra) {
					if rr.Header().Name == "external.example.org." || rr.Header().Rrtype == miekg.TypeTXT {
						continue // upstream's TTL; the version record's own TTL
					}
					if rr.Header().Ttl != testTTL {
						t.Errorf("TTL of %s = %d, want %d", rr, rr.Header().Ttl, testTTL)
					}
				}
			})
		}
	}
}

// soaPrefix drops the serial and timers of an SOA record's text, which change over time.
func soaPrefix(rr string) string {
	f := strings.Fields(rr)
	if len(f) > 4 && f[1] == "SOA" {
		return strings.Join(f[:4], " ")
	}
	return rr
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func TestNegativeAnswerSOA(t *testing.T) {
	s, _ := startServer(t, clusterObjects()...)
	resp := query(t, s.Addr(), "missing.default.svc.cluster.local.", miekg.TypeA, queryOpts{})
	if len(resp.Ns) != 1 {
		t.Fatalf("authority = %v, want one SOA", resp.Ns)
	}
	soa, ok := resp.Ns[0].(*miekg.SOA)
	if !ok {
		t.Fatalf("authority = %v, want an SOA", resp.Ns[0])
	}
	// The negative-caching TTL is the SOA's minimum and TTL, the server's TTL.
	if soa.Minttl != testTTL || soa.Hdr.Ttl != testTTL || soa.Serial == 0 {
		t.Errorf("SOA = %v, want minimum and TTL %d and a serial", soa, testTTL)
	}
}
