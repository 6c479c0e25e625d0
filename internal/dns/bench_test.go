package dns

import (
	"fmt"
	"net"
	"testing"

	miekg "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// packWriter is a ResponseWriter that packs the reply, as the UDP server would, and
// drops it.
type packWriter struct{ buf []byte }

func (w *packWriter) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53} }
func (w *packWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
}
func (w *packWriter) WriteMsg(m *miekg.Msg) error {
	var err error
	w.buf, err = m.PackBuffer(w.buf)
	return err
}
func (w *packWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *packWriter) Close() error                { return nil }
func (w *packWriter) TsigStatus() error           { return nil }
func (w *packWriter) TsigTimersOnly(bool)         {}
func (w *packWriter) Hijack()                     {}

// BenchmarkServeDNS answers cluster queries in a cluster of 1000 services, without the
// network, to show the cost and allocations of one query.
func BenchmarkServeDNS(b *testing.B) {
	tcp := v1.ProtocolTCP
	objs := []runtime.Object{namespace("default")}
	for i := range 1000 {
		name := fmt.Sprintf("svc-%d", i)
		objs = append(objs,
			service("default", name, v1.ServiceSpec{ClusterIP: fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), Ports: []v1.ServicePort{port("http", tcp, 80)}}),
			slice("default", name+"-abc", name, discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("http", tcp, 8080)},
				testEndpoint{addr: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}, testEndpoint{addr: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)}))
	}
	s := startServerWith(b, fake.NewClientset(objs...), "")
	eventually(b, "every service is indexed", func() bool { return s.idx.lookup("svc-999.default.svc.cluster.local.") != nil })

	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"svc-500.default.svc.cluster.local.", miekg.TypeA},
		{"_http._tcp.svc-500.default.svc.cluster.local.", miekg.TypeSRV},
		{"missing.default.svc.cluster.local.", miekg.TypeA},
	} {
		b.Run(miekg.TypeToString[q.qtype]+" "+q.name, func(b *testing.B) {
			req := new(miekg.Msg)
			req.SetQuestion(q.name, q.qtype)
			w := &packWriter{}
			b.ReportAllocs()
			for b.Loop() {
				s.ServeDNS(w, req)
			}
		})
	}
}
