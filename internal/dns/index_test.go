package dns

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestIndexEvents applies informer events in orders the informers may deliver them and
// checks the addresses each name ends up with.
func TestIndexEvents(t *testing.T) {
	tcp := v1.ProtocolTCP
	ports := []discoveryv1.EndpointPort{slicePort("http", tcp, 80)}
	headless := func(name string) *v1.Service {
		return service("default", name, v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{port("http", tcp, 80)}})
	}
	const (
		a = "a.default.svc.cluster.local."
		b = "b.default.svc.cluster.local."
	)
	tests := []struct {
		name   string
		events func(x *index)
		want   map[string][]string // name: addresses; nil for no records
		ptr    map[string][]string // address: PTR targets
		empty  bool                // nothing is left in the index
	}{
		{
			name: "a slice seen before its service",
			events: func(x *index) {
				x.setSlice(slice("default", "a-1", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}))
				x.setService(headless("a"))
			},
			want: map[string][]string{a: {"10.0.0.1"}, "10-0-0-1." + a: {"10.0.0.1"}},
			ptr:  map[string][]string{"10.0.0.1": {"10-0-0-1." + a}},
		},
		{
			name: "two slices of one service, one address in both",
			events: func(x *index) {
				x.setService(headless("a"))
				x.setSlice(slice("default", "a-1", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}, testEndpoint{addr: "10.0.0.2"}))
				x.setSlice(slice("default", "a-2", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.2"}, testEndpoint{addr: "10.0.0.3"}))
			},
			want: map[string][]string{a: {"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
			ptr:  map[string][]string{"10.0.0.2": {"10-0-0-2." + a}},
		},
		{
			name: "dual-stack slices",
			events: func(x *index) {
				x.setService(headless("a"))
				x.setSlice(slice("default", "a-4", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1", hostname: "pod-0"}))
				x.setSlice(slice("default", "a-6", "a", discoveryv1.AddressTypeIPv6, ports, testEndpoint{addr: "fd00::1", hostname: "pod-0"}))
			},
			want: map[string][]string{a: {"10.0.0.1", "fd00::1"}, "pod-0." + a: {"10.0.0.1", "fd00::1"}},
			ptr:  map[string][]string{"fd00::1": {"pod-0." + a}},
		},
		{
			name: "FQDN slices give no records",
			events: func(x *index) {
				x.setService(headless("a"))
				x.setSlice(slice("default", "a-f", "a", discoveryv1.AddressTypeFQDN, ports, testEndpoint{addr: "example.com"}))
			},
			want: map[string][]string{a: nil},
		},
		{
			name: "a slice relabelled to another service moves with it",
			events: func(x *index) {
				x.setService(headless("a"))
				x.setService(headless("b"))
				x.setSlice(slice("default", "s", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}))
				x.setSlice(slice("default", "s", "b", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}))
			},
			want: map[string][]string{a: nil, b: {"10.0.0.1"}},
			ptr:  map[string][]string{"10.0.0.1": {"10-0-0-1." + b}},
		},
		{
			name: "a slice deleted",
			events: func(x *index) {
				x.setService(headless("a"))
				x.setSlice(slice("default", "a-1", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}))
				x.deleteSlice("default", "a-1")
			},
			want: map[string][]string{a: nil, "10-0-0-1." + a: nil},
			ptr:  map[string][]string{"10.0.0.1": nil},
		},
		{
			name: "a service turned from headless to cluster IP",
			events: func(x *index) {
				x.setService(headless("a"))
				x.setSlice(slice("default", "a-1", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}))
				x.setService(service("default", "a", v1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []v1.ServicePort{port("http", tcp, 80)}}))
			},
			want: map[string][]string{a: {"10.96.0.5"}, "10-0-0-1." + a: {"10.0.0.1"}},
			ptr:  map[string][]string{"10.96.0.5": {a}, "10.0.0.1": {"10-0-0-1." + a}},
		},
		{
			name: "a cluster IP's PTR wins over an endpoint's",
			events: func(x *index) {
				x.setService(service("default", "a", v1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []v1.ServicePort{port("http", tcp, 80)}}))
				x.setService(headless("b"))
				x.setSlice(slice("default", "b-1", "b", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.96.0.5"}))
			},
			ptr: map[string][]string{"10.96.0.5": {a}},
		},
		{
			name: "a service deleted takes its names and reverse names",
			events: func(x *index) {
				x.setService(service("default", "a", v1.ServiceSpec{ClusterIP: "10.96.0.5", Ports: []v1.ServicePort{port("http", tcp, 80)}}))
				x.setSlice(slice("default", "a-1", "a", discoveryv1.AddressTypeIPv4, ports, testEndpoint{addr: "10.0.0.1"}))
				x.deleteService("default", "a")
			},
			want:  map[string][]string{a: nil, "_http._tcp." + a: nil, "10-0-0-1." + a: nil},
			ptr:   map[string][]string{"10.96.0.5": nil, "10.0.0.1": nil},
			empty: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newIndex("cluster.local.")
			tt.events(x)
			for name, want := range tt.want {
				var got []string
				if n := x.lookup(name); n != nil {
					for _, addr := range n.addrs {
						got = append(got, addr.String())
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("addresses of %s = %v, want %v", name, got, want)
				}
			}
			for addr, want := range tt.ptr {
				if got := x.ptrTargets(netip.MustParseAddr(addr)); !slices.Equal(got, want) {
					t.Errorf("PTR of %s = %v, want %v", addr, got, want)
				}
			}
			if len(tt.want) == 0 && len(tt.ptr) == 0 {
				t.Fatal("a case that checks nothing")
			}
			if tt.empty && (len(x.names) != 0 || len(x.reverse) != 0 || len(x.owned) != 0) {
				t.Errorf("records left behind: %d names, %d addresses, %d services", len(x.names), len(x.reverse), len(x.owned))
			}
		})
	}
}
