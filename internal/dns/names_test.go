package dns

import (
	"net/netip"
	"strings"
	"testing"

	miekg "github.com/miekg/dns"
)

func reverseName(a netip.Addr) string {
	name, _ := miekg.ReverseAddr(a.String())
	return name
}

func TestParseName(t *testing.T) {
	const zone = "cluster.local."
	tests := []struct {
		qname  string
		want   parsedName
		wantOK bool
	}{
		{"cluster.local.", parsedName{kind: nameApex}, true},
		{"example.com.", parsedName{}, false},
		{"notcluster.local.", parsedName{}, false},
		{"local.", parsedName{}, false},
		{"dns-version.cluster.local.", parsedName{kind: nameDNSVersion}, true},
		{"ns.dns.cluster.local.", parsedName{kind: nameNameserver}, true},
		{"dns.cluster.local.", parsedName{kind: nameInvalid}, true},
		{"svc.cluster.local.", parsedName{kind: nameSvcRoot}, true},
		{"pod.cluster.local.", parsedName{kind: namePodRoot}, true},
		{"default.svc.cluster.local.", parsedName{kind: nameSvcNamespace, namespace: "default"}, true},
		{"default.pod.cluster.local.", parsedName{kind: namePodNamespace, namespace: "default"}, true},
		{"web.default.svc.cluster.local.", parsedName{kind: nameService, namespace: "default", first: "web", key: "web.default.svc.cluster.local."}, true},
		{"db-0.db.default.svc.cluster.local.", parsedName{kind: nameService, namespace: "default", first: "db", key: "db-0.db.default.svc.cluster.local."}, true},
		{"_http._tcp.web.default.svc.cluster.local.", parsedName{kind: nameService, namespace: "default", first: "web", key: "_http._tcp.web.default.svc.cluster.local."}, true},
		// CoreDNS takes the SRV labels without their underscores too.
		{"http.tcp.web.default.svc.cluster.local.", parsedName{kind: nameService, namespace: "default", first: "web", key: "_http._tcp.web.default.svc.cluster.local."}, true},
		{"a.b.c.web.default.svc.cluster.local.", parsedName{kind: nameInvalid}, true},
		{"10-1-2-3.default.pod.cluster.local.", parsedName{kind: namePod, namespace: "default", first: "10-1-2-3"}, true},
		{"x.10-1-2-3.default.pod.cluster.local.", parsedName{kind: nameInvalid}, true},
		{"web.default.cluster.local.", parsedName{kind: nameInvalid}, true},
		{"foo.cluster.local.", parsedName{kind: nameInvalid}, true},
		{`we\.b.default.svc.cluster.local.`, parsedName{kind: nameInvalid}, true},
		{"web..svc.cluster.local.", parsedName{kind: nameInvalid}, true},
		{".svc.cluster.local.", parsedName{kind: nameInvalid}, true},
	}
	for _, tt := range tests {
		t.Run(tt.qname, func(t *testing.T) {
			got, ok := parseName(tt.qname, zone)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("parseName(%q) = %+v, %v; want %+v, %v", tt.qname, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPodAddr(t *testing.T) {
	tests := []struct {
		label string
		want  string // "" for no address
	}{
		{"10-1-2-3", "10.1.2.3"},
		{"fd00--5", "fd00::5"},
		{"fd00-0-0-0-0-0-0-5", "fd00::5"},
		{"1-2-3", ""},
		{"10-1-2-300", ""},
		{"web", ""},
		{"fe80--1%eth0", ""},
		{"1.2.3.4", ""},
		{"--1", "::1"},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := podAddr(tt.label)
		if tt.want == "" {
			if ok {
				t.Errorf("podAddr(%q) = %v, want no address", tt.label, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tt.want) {
			t.Errorf("podAddr(%q) = %v, %v; want %s", tt.label, got, ok, tt.want)
		}
	}
}

func TestDashedAddr(t *testing.T) {
	for addr, want := range map[string]string{"10.1.0.7": "10-1-0-7", "fd00::7": "fd00--7"} {
		if got := dashedAddr(netip.MustParseAddr(addr)); got != want {
			t.Errorf("dashedAddr(%s) = %q, want %q", addr, got, want)
		}
		// The dashed form reads back as the same address.
		if back, ok := podAddr(want); !ok || back != netip.MustParseAddr(addr) {
			t.Errorf("podAddr(%q) = %v, %v; want %s", want, back, ok, addr)
		}
	}
}

func TestAddrFromReverse(t *testing.T) {
	v6 := "1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."
	tests := []struct {
		qname string
		want  string // "" for no address
	}{
		{"20.0.96.10.in-addr.arpa.", "10.96.0.20"},
		{"0.0.0.0.in-addr.arpa.", "0.0.0.0"},
		{v6, "fd00::21"},
		{"0.96.10.in-addr.arpa.", ""},
		{"1.0.0.96.10.in-addr.arpa.", ""},
		{"256.0.96.10.in-addr.arpa.", ""},
		{"01.0.96.10.in-addr.arpa.", ""},
		{"a.0.96.10.in-addr.arpa.", ""},
		{"in-addr.arpa.", ""},
		{strings.TrimPrefix(v6, "1."), ""},
		{"g" + v6[1:], ""},
		{"example.com.", ""},
	}
	for _, tt := range tests {
		got, ok := addrFromReverse(tt.qname)
		if tt.want == "" {
			if ok {
				t.Errorf("addrFromReverse(%q) = %v, want no address", tt.qname, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tt.want) {
			t.Errorf("addrFromReverse(%q) = %v, %v; want %s", tt.qname, got, ok, tt.want)
		}
	}
}

// FuzzParseName checks that any name splits without panicking, that a name inside the
// zone is classified, and that a service name's lookup key stays inside the zone.
func FuzzParseName(f *testing.F) {
	const zone = "cluster.local."
	for _, s := range []string{"cluster.local.", "web.default.svc.cluster.local.", "_http._tcp.web.default.svc.cluster.local.",
		"http.tcp.web.default.svc.cluster.local.", "10-1-2-3.default.pod.cluster.local.", "..svc.cluster.local.", "_._.a.b.svc.cluster.local.", "example.com."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, qname string) {
		p, ok := parseName(qname, zone)
		inZone := qname == zone || strings.HasSuffix(qname, "."+zone)
		if ok != inZone {
			t.Fatalf("parseName(%q) ok = %v, but inside the zone = %v", qname, ok, inZone)
		}
		if p.kind == nameService {
			if !strings.HasSuffix(p.key, "."+p.first+"."+p.namespace+".svc."+zone) && p.key != p.first+"."+p.namespace+".svc."+zone {
				t.Fatalf("parseName(%q) key %q is not under its service %q.%q", qname, p.key, p.first, p.namespace)
			}
			if p.first == "" || p.namespace == "" {
				t.Fatalf("parseName(%q) = %+v: empty label", qname, p)
			}
		}
	})
}

// FuzzAddrFromReverse checks that a reverse name read as an address writes back as the
// same name.
func FuzzAddrFromReverse(f *testing.F) {
	f.Add("20.0.96.10.in-addr.arpa.")
	f.Add("1.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.")
	f.Add("0.96.10.in-addr.arpa.")
	f.Fuzz(func(t *testing.T, qname string) {
		a, ok := addrFromReverse(qname)
		if !ok {
			return
		}
		if back := reverseName(a); back != qname {
			t.Fatalf("addrFromReverse(%q) = %v, which writes back as %q", qname, a, back)
		}
	})
}

// FuzzPodAddr checks that a pod label read as an address is that address dashed, or an
// IPv6 spelling of it.
func FuzzPodAddr(f *testing.F) {
	for _, s := range []string{"10-1-2-3", "fd00--5", "1-2-3", "::1", "1-2-3-4-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, label string) {
		a, ok := podAddr(label)
		if !ok {
			return
		}
		if a.Zone() != "" || strings.ContainsAny(label, ".:") {
			t.Fatalf("podAddr(%q) = %v", label, a)
		}
		if back, ok := podAddr(dashedAddr(a)); !ok || back != a {
			t.Fatalf("podAddr(%q) = %v, whose dashed form %q reads back as %v, %v", label, a, dashedAddr(a), back, ok)
		}
	})
}
