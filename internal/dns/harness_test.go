package dns

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	miekg "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// testTTL differs from the default so that tests show the option is applied.
const testTTL = 7

// startUpstream runs a resolver on loopback (UDP and TCP on one port) answering with
// handler, and returns its address.
func startUpstream(t testing.TB, handler miekg.HandlerFunc) string {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	for range 10 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		_ = pc.Close()
		ln = nil
	}
	if ln == nil {
		t.Fatal("no port free for both UDP and TCP")
	}
	for _, srv := range []*miekg.Server{{PacketConn: pc, Handler: handler}, {Listener: ln, Handler: handler}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	return pc.LocalAddr().String()
}

// upstreamZone is what the fake upstream resolver knows.
func upstreamZone(w miekg.ResponseWriter, req *miekg.Msg) {
	reply := new(miekg.Msg)
	reply.SetReply(req)
	q := req.Question[0]
	add := func(rr string) {
		r, err := miekg.NewRR(rr)
		if err != nil {
			panic(err)
		}
		reply.Answer = append(reply.Answer, r)
	}
	switch {
	case q.Name == "example.com." && q.Qtype == miekg.TypeA:
		add("example.com. 300 IN A 192.0.2.1")
	case q.Name == "example.com.":
	case q.Name == "external.example.org." && q.Qtype == miekg.TypeA:
		add("external.example.org. 300 IN A 198.51.100.7")
	case q.Name == "external.example.org.":
	case q.Name == "1.2.0.192.in-addr.arpa." && q.Qtype == miekg.TypePTR:
		add("1.2.0.192.in-addr.arpa. 300 IN PTR host.example.com.")
	case q.Name == "many.example.com." && q.Qtype == miekg.TypeA:
		for i := range 100 {
			add(fmt.Sprintf("many.example.com. 300 IN A 192.0.2.%d", i+1))
		}
	default:
		reply.Rcode = miekg.RcodeNameError
	}
	if opt := req.IsEdns0(); opt != nil {
		reply.SetEdns0(opt.UDPSize(), false)
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := miekg.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		reply.Truncate(size)
	}
	_ = w.WriteMsg(reply)
}

// writeResolvConf writes a resolv.conf naming the given resolvers.
func writeResolvConf(t testing.TB, servers ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("search example.com\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startServer runs a DNS server over a fake clientset holding objs, forwarding to the
// fake upstream, and waits until it reports ready.
func startServer(t *testing.T, objs ...runtime.Object) (*Server, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	s := startServerWith(t, client, writeResolvConf(t, startUpstream(t, upstreamZone)))
	waitReady(t, s)
	return s, client
}

func startServerWith(t testing.TB, client *fake.Clientset, resolvConf string) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, client, Options{
		Listen:             "127.0.0.1:0",
		ClusterDomain:      "cluster.local",
		TTL:                testTTL,
		HealthAddr:         "127.0.0.1:0",
		UpstreamResolvConf: resolvConf,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := s.Wait(); err != nil {
			t.Errorf("server stopped with %v", err)
		}
	})
	return s
}

func waitReady(t *testing.T, s *Server) {
	t.Helper()
	eventually(t, "the server reports ready", func() bool {
		code, _ := httpGet(t, s.HealthAddr(), "/ready")
		return code == 200
	})
}

// eventually polls cond until it holds, failing the test after a generous timeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queryOpts shape a test query.
type queryOpts struct {
	network  string // "udp" (default) or "tcp"
	ednsSize uint16 // 0: no EDNS0
}

func query(t *testing.T, addr, name string, qtype uint16, o queryOpts) *miekg.Msg {
	t.Helper()
	m := new(miekg.Msg)
	m.SetQuestion(name, qtype)
	if o.ednsSize != 0 {
		m.SetEdns0(o.ednsSize, false)
	}
	network := o.network
	if network == "" {
		network = "udp"
	}
	c := &miekg.Client{Net: network, Timeout: 10 * time.Second}
	if o.ednsSize != 0 {
		c.UDPSize = o.ednsSize
	}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("querying %s %s over %s: %v", name, miekg.TypeToString[qtype], network, err)
	}
	return resp
}

// rrTexts writes records as "name TYPE data", without TTL and class, sorted.
func rrTexts(rrs []miekg.RR) []string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == miekg.TypeOPT {
			continue
		}
		f := strings.Split(rr.String(), "\t")
		// name, ttl, class, type, data...
		out = append(out, f[0]+" "+f[3]+" "+strings.Join(f[4:], " "))
	}
	slices.Sort(out)
	return out
}

// httpGet fetches a path from the health port; a failed request gives status 0.
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Objects for the tests.

func namespace(name string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func service(ns, name string, spec v1.ServiceSpec) *v1.Service {
	if spec.Type == "" {
		spec.Type = v1.ServiceTypeClusterIP
	}
	if len(spec.ClusterIPs) == 0 && spec.ClusterIP != "" {
		spec.ClusterIPs = []string{spec.ClusterIP}
	}
	if spec.ClusterIP == "" && len(spec.ClusterIPs) > 0 {
		spec.ClusterIP = spec.ClusterIPs[0]
	}
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func port(name string, protocol v1.Protocol, number int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: protocol, Port: number}
}

// testEndpoint is one endpoint of a slice: its address, hostname and readiness.
type testEndpoint struct {
	addr     string
	hostname string
	notReady bool
}

func slice(ns, name, svc string, addrType discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...testEndpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: addrType,
		Ports:       ports,
	}
	for _, ep := range eps {
		e := discoveryv1.Endpoint{Addresses: []string{ep.addr}}
		ready := !ep.notReady
		e.Conditions.Ready = &ready
		if ep.hostname != "" {
			e.Hostname = &ep.hostname
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

func slicePort(name string, protocol v1.Protocol, number int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: &name, Protocol: &protocol, Port: &number}
}
