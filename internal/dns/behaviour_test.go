package dns

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	miekg "github.com/miekg/dns"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestUpdatesAreFollowed changes the cluster step by step and waits for each change to
// show in the answers.
func TestUpdatesAreFollowed(t *testing.T) {
	s, client := startServer(t, namespace("default"))
	tcp := v1.ProtocolTCP
	const (
		web = "web.default.svc.cluster.local."
		db  = "db.default.svc.cluster.local."
	)
	dbSlice := func(eps ...testEndpoint) *discoveryv1.EndpointSlice {
		return slice("default", "db-abc", "db", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("pg", tcp, 5432)}, eps...)
	}
	steps := []struct {
		name   string
		do     func(ctx context.Context) error
		qname  string
		qtype  uint16
		rcode  int
		answer []string
	}{
		{
			name:  "a service created resolves",
			do:    create(client, service("default", "web", v1.ServiceSpec{ClusterIP: "10.96.0.30", Ports: []v1.ServicePort{port("http", tcp, 80)}})),
			qname: web, qtype: miekg.TypeA, answer: []string{web + " A 10.96.0.30"},
		},
		{
			name: "a port added gets its SRV name",
			do: update(client, service("default", "web", v1.ServiceSpec{ClusterIP: "10.96.0.30",
				Ports: []v1.ServicePort{port("http", tcp, 80), port("https", tcp, 443)}})),
			qname: "_https._tcp." + web, qtype: miekg.TypeSRV, answer: []string{"_https._tcp." + web + " SRV 0 100 443 " + web},
		},
		{
			name:  "a headless service without endpoints does not resolve",
			do:    create(client, service("default", "db", v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{port("pg", tcp, 5432)}})),
			qname: db, qtype: miekg.TypeA, rcode: miekg.RcodeNameError,
		},
		{
			name:  "its endpoints appear",
			do:    create(client, dbSlice(testEndpoint{addr: "10.1.0.5", hostname: "db-0"})),
			qname: db, qtype: miekg.TypeA, answer: []string{db + " A 10.1.0.5"},
		},
		{
			name:  "an endpoint added",
			do:    update(client, dbSlice(testEndpoint{addr: "10.1.0.5", hostname: "db-0"}, testEndpoint{addr: "10.1.0.6", hostname: "db-1"})),
			qname: db, qtype: miekg.TypeA, answer: []string{db + " A 10.1.0.5", db + " A 10.1.0.6"},
		},
		{
			name: "an endpoint no longer ready",
			do: update(client, dbSlice(testEndpoint{addr: "10.1.0.5", hostname: "db-0", notReady: true},
				testEndpoint{addr: "10.1.0.6", hostname: "db-1"})),
			qname: db, qtype: miekg.TypeA, answer: []string{db + " A 10.1.0.6"},
		},
		{
			name:  "the not-ready endpoint loses its name",
			do:    func(context.Context) error { return nil },
			qname: "db-0." + db, qtype: miekg.TypeA, rcode: miekg.RcodeNameError,
		},
		{
			name: "publishNotReadyAddresses set brings it back",
			do: update(client, service("default", "db", v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, PublishNotReadyAddresses: true,
				Ports: []v1.ServicePort{port("pg", tcp, 5432)}})),
			qname: "db-0." + db, qtype: miekg.TypeA, answer: []string{"db-0." + db + " A 10.1.0.5"},
		},
		{
			name: "the slice deleted",
			do: func(ctx context.Context) error {
				return client.DiscoveryV1().EndpointSlices("default").Delete(ctx, "db-abc", metav1.DeleteOptions{})
			},
			qname: db, qtype: miekg.TypeA, rcode: miekg.RcodeNameError,
		},
		{
			name: "a service deleted stops resolving",
			do: func(ctx context.Context) error {
				return client.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{})
			},
			qname: web, qtype: miekg.TypeA, rcode: miekg.RcodeNameError,
		},
		{
			name:  "its cluster IP's reverse name goes upstream again",
			do:    func(context.Context) error { return nil },
			qname: "30.0.96.10.in-addr.arpa.", qtype: miekg.TypePTR, rcode: miekg.RcodeNameError,
		},
		{
			name: "a namespace deleted is no longer a name",
			do: func(ctx context.Context) error {
				return client.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{})
			},
			qname: "default.svc.cluster.local.", qtype: miekg.TypeA, rcode: miekg.RcodeNameError,
		},
	}
	for _, step := range steps {
		if err := step.do(t.Context()); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var last string
		eventually(t, step.name, func() bool {
			resp := query(t, s.Addr(), step.qname, step.qtype, queryOpts{})
			got := rrTexts(resp.Answer)
			last = fmt.Sprintf("%s %v", miekg.RcodeToString[resp.Rcode], got)
			return resp.Rcode == step.rcode && slices.Equal(got, sortedCopy(step.answer))
		})
		t.Logf("%s: %s", step.name, last)
	}
}

func create[T runtime.Object](client *fake.Clientset, obj T) func(context.Context) error {
	return func(ctx context.Context) error {
		switch o := any(obj).(type) {
		case *v1.Service:
			_, err := client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			return err
		case *discoveryv1.EndpointSlice:
			_, err := client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			return err
		}
		return fmt.Errorf("cannot create %T", obj)
	}
}

func update[T runtime.Object](client *fake.Clientset, obj T) func(context.Context) error {
	return func(ctx context.Context) error {
		switch o := any(obj).(type) {
		case *v1.Service:
			_, err := client.CoreV1().Services(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			return err
		case *discoveryv1.EndpointSlice:
			_, err := client.DiscoveryV1().EndpointSlices(o.Namespace).Update(ctx, o, metav1.UpdateOptions{})
			return err
		}
		return fmt.Errorf("cannot update %T", obj)
	}
}

func TestTruncation(t *testing.T) {
	tcp := v1.ProtocolTCP
	var eps []testEndpoint
	for i := range 100 {
		eps = append(eps, testEndpoint{addr: fmt.Sprintf("10.2.0.%d", i+1)})
	}
	s, _ := startServer(t, namespace("default"),
		service("default", "big", v1.ServiceSpec{ClusterIP: v1.ClusterIPNone, Ports: []v1.ServicePort{port("http", tcp, 80)}}),
		slice("default", "big-abc", "big", discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{slicePort("http", tcp, 80)}, eps...))

	tests := []struct {
		name      string
		qname     string
		opts      queryOpts
		truncated bool
		maxSize   int // the reply fits this many bytes
	}{
		{"cluster answer over UDP without EDNS0", "big.default.svc.cluster.local.", queryOpts{}, true, 512},
		{"cluster answer over UDP with a 4096-byte EDNS0 buffer", "big.default.svc.cluster.local.", queryOpts{ednsSize: 4096}, false, 4096},
		{"cluster answer over UDP with a 1232-byte EDNS0 buffer", "big.default.svc.cluster.local.", queryOpts{ednsSize: 1232}, true, 1232},
		{"cluster answer over TCP", "big.default.svc.cluster.local.", queryOpts{network: "tcp"}, false, miekg.MaxMsgSize},
		{"forwarded answer over UDP without EDNS0", "many.example.com.", queryOpts{}, true, 512},
		{"forwarded answer over UDP with a 4096-byte EDNS0 buffer", "many.example.com.", queryOpts{ednsSize: 4096}, false, 4096},
		{"forwarded answer over TCP", "many.example.com.", queryOpts{network: "tcp"}, false, miekg.MaxMsgSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := query(t, s.Addr(), tt.qname, miekg.TypeA, tt.opts)
			if resp.Truncated != tt.truncated {
				t.Errorf("TC = %v, want %v", resp.Truncated, tt.truncated)
			}
			n := len(resp.Answer)
			switch {
			case tt.truncated && (n == 0 || n >= 100):
				t.Errorf("%d answers in a truncated reply, want some but not all 100", n)
			case !tt.truncated && n != 100:
				t.Errorf("%d answers, want all 100", n)
			}
			resp.Compress = true // as the server sent it
			packed, err := resp.Pack()
			if err != nil {
				t.Fatal(err)
			}
			if len(packed) > tt.maxSize {
				t.Errorf("reply of %d bytes, over the %d the asker can take", len(packed), tt.maxSize)
			}
			if hasOPT := resp.IsEdns0() != nil; hasOPT != (tt.opts.ednsSize != 0) {
				t.Errorf("reply has an OPT record: %v; the query had one: %v", hasOPT, tt.opts.ednsSize != 0)
			}
		})
	}
}

// TestReadiness checks the health port and that the cluster zone is not answered before
// the informers have their first lists.
func TestReadiness(t *testing.T) {
	client := fake.NewClientset(clusterObjects()...)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	s := startServerWith(t, client, writeResolvConf(t, startUpstream(t, upstreamZone)))

	const web = "web.default.svc.cluster.local."
	if code, body := httpGet(t, s.HealthAddr(), "/health"); code != 200 || body != "OK" {
		t.Errorf("/health = %d %q, want 200 OK", code, body)
	}
	if code, body := httpGet(t, s.HealthAddr(), "/ready"); code != 503 || body != "kubernetes" {
		t.Errorf("/ready before the informers synced = %d %q, want 503 kubernetes", code, body)
	}
	if resp := query(t, s.Addr(), web, miekg.TypeA, queryOpts{}); resp.Rcode != miekg.RcodeServerFailure {
		t.Errorf("a cluster name before the informers synced: %s, want SERVFAIL", miekg.RcodeToString[resp.Rcode])
	}
	if resp := query(t, s.Addr(), "example.com.", miekg.TypeA, queryOpts{}); resp.Rcode != miekg.RcodeSuccess || len(resp.Answer) != 1 {
		t.Errorf("a name outside the cluster before the informers synced: %s %v, want it forwarded", miekg.RcodeToString[resp.Rcode], resp.Answer)
	}

	unblock()
	waitReady(t, s)
	if code, body := httpGet(t, s.HealthAddr(), "/ready"); code != 200 || body != "OK" {
		t.Errorf("/ready after sync = %d %q, want 200 OK", code, body)
	}
	if resp := query(t, s.Addr(), web, miekg.TypeA, queryOpts{}); resp.Rcode != miekg.RcodeSuccess || len(resp.Answer) != 1 {
		t.Errorf("a cluster name after sync: %s %v, want its address", miekg.RcodeToString[resp.Rcode], resp.Answer)
	}
}

// TestForwardingLoop points the server at a resolver that sends every query back to it,
// as a node-local cache misconfigured to use the cluster DNS would. Once the loop is
// seen, a forwarded query must fail at once instead of going round (reaching that
// resolver at most once).
func TestForwardingLoop(t *testing.T) {
	var target atomic.Pointer[string]
	targetSet := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]int{}
	relay := startUpstream(t, func(w miekg.ResponseWriter, req *miekg.Msg) {
		mu.Lock()
		seen[strings.ToLower(req.Question[0].Name)]++
		mu.Unlock()
		select {
		case <-targetSet:
		case <-time.After(10 * time.Second):
		}
		reply := new(miekg.Msg)
		reply.SetRcode(req, miekg.RcodeServerFailure)
		if addr := target.Load(); addr != nil {
			if resp, _, err := (&miekg.Client{Timeout: 3 * time.Second}).Exchange(req, *addr); err == nil {
				reply = resp
			}
		}
		_ = w.WriteMsg(reply)
	})
	s := startServerWith(t, fake.NewClientset(namespace("default")), writeResolvConf(t, relay))
	addr := s.Addr()
	target.Store(&addr)
	close(targetSet)
	waitReady(t, s)

	attempt := 0
	eventually(t, "a forwarded query fails without going round the loop", func() bool {
		attempt++
		name := fmt.Sprintf("try%d.example.com.", attempt)
		resp := query(t, s.Addr(), name, miekg.TypeA, queryOpts{})
		mu.Lock()
		trips := seen[name]
		mu.Unlock()
		t.Logf("%s: %s after %d trips to the relay", name, miekg.RcodeToString[resp.Rcode], trips)
		return resp.Rcode == miekg.RcodeServerFailure && trips <= 1
	})
	// The cluster zone is still answered.
	if resp := query(t, s.Addr(), "default.svc.cluster.local.", miekg.TypeA, queryOpts{}); resp.Rcode != miekg.RcodeSuccess {
		t.Errorf("a cluster name after the loop was found: %s, want NOERROR", miekg.RcodeToString[resp.Rcode])
	}
}

func TestNoUpstream(t *testing.T) {
	s := startServerWith(t, fake.NewClientset(namespace("default")), "")
	waitReady(t, s)
	if resp := query(t, s.Addr(), "example.com.", miekg.TypeA, queryOpts{}); resp.Rcode != miekg.RcodeServerFailure {
		t.Errorf("a name outside the cluster without upstreams: %s, want SERVFAIL", miekg.RcodeToString[resp.Rcode])
	}
	if resp := query(t, s.Addr(), "default.svc.cluster.local.", miekg.TypeA, queryOpts{}); resp.Rcode != miekg.RcodeSuccess {
		t.Errorf("a cluster name without upstreams: %s, want NOERROR", miekg.RcodeToString[resp.Rcode])
	}
}

func TestWithoutSelf(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("127.0.0.1")}
	tests := []struct {
		name      string
		listen    string
		upstreams []string
		want      []string
	}{
		{"loopback on our port is us", "0.0.0.0:53", []string{"127.0.0.53:53", "127.0.0.1:53", "[::1]:53", "10.0.0.2:53"}, []string{"10.0.0.2:53"}},
		{"loopback on another port is not", "127.0.0.1:53", []string{"127.0.0.1:5353"}, []string{"127.0.0.1:5353"}},
		{"a local address is us when listening on all", "0.0.0.0:53", []string{"192.168.1.10:53", "192.168.1.11:53"}, []string{"192.168.1.11:53"}},
		{"a local address is not us when listening on another", "10.96.0.10:53", []string{"192.168.1.10:53", "10.96.0.10:53"}, []string{"192.168.1.10:53"}},
		{"loopback is not us when listening on one address", "192.168.1.10:53", []string{"127.0.0.53:53", "127.0.0.1:53"}, []string{"127.0.0.53:53", "127.0.0.1:53"}},
		{"the loopback address we listen on is us", "127.0.0.1:53", []string{"127.0.0.53:53", "127.0.0.1:53"}, []string{"127.0.0.53:53"}},
		{"a name is no upstream", "0.0.0.0:53", []string{"dns.example.com:53"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := withoutSelf(tt.upstreams, netip.MustParseAddrPort(tt.listen), local, slog.New(slog.DiscardHandler))
			if !slices.Equal(got, tt.want) {
				t.Errorf("withoutSelf(%v) = %v, want %v", tt.upstreams, got, tt.want)
			}
		})
	}
}

func TestUpstreamsFromResolvConf(t *testing.T) {
	path := writeResolvConf(t, "10.0.0.2", "fd00::2", "127.0.0.1:5353", "[::1]:5353")
	got, err := upstreamsFromResolvConf(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.2:53", "[fd00::2]:53", "127.0.0.1:5353", "[::1]:5353"}
	if !slices.Equal(got, want) {
		t.Errorf("upstreams = %v, want %v", got, want)
	}
	if _, err := upstreamsFromResolvConf(path + ".missing"); err == nil {
		t.Error("a missing resolv.conf gave no error")
	}
}

// TestQueryClasses checks that only class IN is answered from the cluster.
func TestQueryClasses(t *testing.T) {
	s, _ := startServer(t, clusterObjects()...)
	tests := []struct {
		name  string
		qname string
		class uint16
		rcode int
	}{
		{"IN in the cluster zone", "web.default.svc.cluster.local.", miekg.ClassINET, miekg.RcodeSuccess},
		{"CH in the cluster zone is refused", "web.default.svc.cluster.local.", miekg.ClassCHAOS, miekg.RcodeRefused},
		{"CH elsewhere goes upstream", "version.bind.", miekg.ClassCHAOS, miekg.RcodeNameError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := new(miekg.Msg)
			m.SetQuestion(tt.qname, miekg.TypeA)
			m.Question[0].Qclass = tt.class
			resp, _, err := (&miekg.Client{Timeout: 10 * time.Second}).Exchange(m, s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Rcode != tt.rcode {
				t.Errorf("rcode = %s, want %s", miekg.RcodeToString[resp.Rcode], miekg.RcodeToString[tt.rcode])
			}
		})
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	good := Options{Listen: "127.0.0.1:0", ClusterDomain: "cluster.local", TTL: 5}
	tests := []struct {
		name   string
		change func(o *Options)
		want   string
	}{
		{"no cluster domain", func(o *Options) { o.ClusterDomain = "" }, "a cluster domain is required"},
		{"a cluster domain that is no name", func(o *Options) { o.ClusterDomain = "a..b" }, "is not a domain name"},
		{"a TTL over an hour", func(o *Options) { o.TTL = 3601 }, "TTL 3601"},
		{"a missing resolv.conf", func(o *Options) { o.UpstreamResolvConf = t.TempDir() + "/missing" }, "reading upstream resolvers"},
		{"a listen address that is no address", func(o *Options) { o.Listen = "nowhere" }, "listening on UDP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := good
			tt.change(&o)
			_, err := Start(t.Context(), fake.NewClientset(), o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
