package core

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEndpointsDefaultsAndValidate(t *testing.T) {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.1.0.5"}},
		Ports:     []corev1.EndpointPort{{Port: 8080}},
	}}}
	r := endpointsResource()
	r.Strategy.Default(ep)
	if p := ep.Subsets[0].Ports[0].Protocol; p != corev1.ProtocolTCP {
		t.Errorf("protocol = %q, want TCP", p)
	}
	assertErrors(t, r.Strategy.Validate(context.Background(), ep), nil)

	tests := []struct {
		name   string
		subset corev1.EndpointSubset
		want   []string
	}{
		{"no addresses", corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Port: 80, Protocol: "TCP"}}},
			[]string{"subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"}},
		{"loopback", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "127.0.0.1"}}},
			[]string{`subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`}},
		{"not an IP", corev1.EndpointSubset{NotReadyAddresses: []corev1.EndpointAddress{{IP: "pod-a"}}},
			[]string{`subsets[0].notReadyAddresses[0].ip: Invalid value: "pod-a": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{"unnamed ports", corev1.EndpointSubset{Addresses: []corev1.EndpointAddress{{IP: "10.1.0.5"}},
			Ports: []corev1.EndpointPort{{Name: "http", Port: 80, Protocol: "TCP"}, {Port: 443, Protocol: "TCP"}}},
			[]string{"subsets[0].ports[1].name: Required value"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: []corev1.EndpointSubset{tc.subset}}
			assertErrors(t, r.Strategy.Validate(context.Background(), bad), tc.want)
		})
	}
}

func TestEndpointsPrinter(t *testing.T) {
	addrs := func(ips ...string) []corev1.EndpointAddress {
		var out []corev1.EndpointAddress
		for _, ip := range ips {
			out = append(out, corev1.EndpointAddress{IP: ip})
		}
		return out
	}
	tests := []struct {
		name    string
		subsets []corev1.EndpointSubset
		want    string
	}{
		{"none", nil, "<none>"},
		{"two", []corev1.EndpointSubset{{Addresses: addrs("10.1.0.5", "10.1.0.6"), Ports: []corev1.EndpointPort{{Port: 8080}}}}, "10.1.0.5:8080,10.1.0.6:8080"},
		{"more than three", []corev1.EndpointSubset{{Addresses: addrs("10.1.0.5", "10.1.0.6", "fd00::7"), Ports: []corev1.EndpointPort{{Port: 80}, {Port: 443}}}},
			"10.1.0.5:80,10.1.0.6:80,[fd00::7]:80 + 3 more..."},
		{"headless without ports", []corev1.EndpointSubset{{Addresses: addrs("10.1.0.5")}}, "10.1.0.5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Subsets: tc.subsets}
			assertRow(t, endpointsResource().Printer.Row(ep), []interface{}{"web", tc.want, "<unknown>"})
		})
	}
}
