package discovery

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func validSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-abc", Namespace: "default"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To("node-1")}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}},
	}
}

func TestEndpointSliceDefault(t *testing.T) {
	r := findResource(t, "endpointslices")
	slice := &discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)}, {}}}
	r.Strategy.Default(slice)
	want := []discoveryv1.EndpointPort{
		{Name: ptr.To(""), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
		{Name: ptr.To(""), Protocol: ptr.To(corev1.ProtocolTCP)},
	}
	if !reflect.DeepEqual(slice.Ports, want) {
		t.Errorf("ports = %+v, want %+v", slice.Ports, want)
	}
}

func TestEndpointSliceValidate(t *testing.T) {
	r := findResource(t, "endpointslices")
	tests := []struct {
		name   string
		mutate func(*discoveryv1.EndpointSlice)
		want   []fieldErr
	}{
		{"valid", func(*discoveryv1.EndpointSlice) {}, nil},
		{"no address type", func(s *discoveryv1.EndpointSlice) { s.AddressType = "" }, []fieldErr{{field.ErrorTypeRequired, "addressType"}}},
		{"unknown address type", func(s *discoveryv1.EndpointSlice) { s.AddressType = "IPX" }, []fieldErr{{field.ErrorTypeNotSupported, "addressType"}}},
		{"IPv6 address in an IPv4 slice", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"fd00::1"} },
			[]fieldErr{{field.ErrorTypeInvalid, "endpoints[0].addresses[0]"}}},
		{"loopback address", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = []string{"127.0.0.1"} },
			[]fieldErr{{field.ErrorTypeInvalid, "endpoints[0].addresses[0]"}}},
		{"endpoint without addresses", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Addresses = nil },
			[]fieldErr{{field.ErrorTypeRequired, "endpoints[0].addresses"}}},
		{"FQDN slice", func(s *discoveryv1.EndpointSlice) {
			s.AddressType = discoveryv1.AddressTypeFQDN
			s.Endpoints[0].Addresses = []string{"db.example.com"}
		}, nil},
		{"too many endpoints", func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = nil
			for i := 0; i < 1001; i++ {
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}})
			}
		}, []fieldErr{{field.ErrorTypeTooMany, "endpoints"}}},
		{"bad hostname", func(s *discoveryv1.EndpointSlice) { s.Endpoints[0].Hostname = ptr.To("Web_1") },
			[]fieldErr{{field.ErrorTypeInvalid, "endpoints[0].hostname"}}},
		{"duplicate port names", func(s *discoveryv1.EndpointSlice) { s.Ports = append(s.Ports, s.Ports[0]) },
			[]fieldErr{{field.ErrorTypeDuplicate, "ports[1].name"}}},
		{"bad protocol", func(s *discoveryv1.EndpointSlice) { s.Ports[0].Protocol = ptr.To(corev1.Protocol("ICMP")) },
			[]fieldErr{{field.ErrorTypeNotSupported, "ports[0].protocol"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSlice()
			tt.mutate(s)
			r.Strategy.Default(s)
			assertErrs(t, r.Strategy.Validate(ctx, s), tt.want)
		})
	}
}

func TestEndpointSliceAddressTypeImmutable(t *testing.T) {
	r := findResource(t, "endpointslices")
	old := validSlice()
	r.Strategy.Default(old)
	updated := old.DeepCopy()
	updated.AddressType = discoveryv1.AddressTypeFQDN
	updated.Endpoints[0].Addresses = []string{"db.example.com"}
	assertErrs(t, r.Strategy.ValidateUpdate(ctx, updated, old), []fieldErr{{field.ErrorTypeInvalid, "addressType"}})
}

func TestEndpointSlicePrint(t *testing.T) {
	r := findResource(t, "endpointslices")
	assertColumns(t, r, "Name", "AddressType", "Ports", "Endpoints", "Age")
	tests := []struct {
		name  string
		slice discoveryv1.EndpointSlice
		want  []interface{}
	}{
		{"empty", discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "e", CreationTimestamp: threeDaysAgo}, AddressType: "IPv4"},
			[]interface{}{"e", "IPv4", "<unset>", "<unset>", "3d"}},
		{"many", discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "m", CreationTimestamp: threeDaysAgo},
			AddressType: "IPv4",
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}, {Name: ptr.To("metrics")}, {}, {Port: ptr.To[int32](9090)}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.0.1", "10.0.0.2"}}, {Addresses: []string{"10.0.0.3"}}, {Addresses: []string{"10.0.0.4", "10.0.0.5"}},
			},
		}, []interface{}{"m", "IPv4", "80,metrics,* + 1 more...", "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...", "3d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Printer.Row(&tt.slice); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("row = %#v, want %#v", got, tt.want)
			}
		})
	}
}
