package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// netnsLab is a small network of namespaces: a node that routes between a client
// (outside the cluster CIDR) and two endpoints (inside it), each over a veth pair.
type netnsLab struct {
	t      *testing.T
	prefix string
}

// Addresses of the lab. The node's address toward the client serves NodePorts.
var (
	labNodeIP   = netip.MustParseAddr("192.168.77.1")
	labClientIP = netip.MustParseAddr("192.168.77.2")
	labEP1      = netip.MustParseAddr("10.77.1.2")
	labEP2      = netip.MustParseAddr("10.77.2.2")
	labCluster  = netip.MustParsePrefix("10.77.0.0/16")
)

// The lab's services: one with both endpoints, one without any.
const (
	labClusterIP  = "10.96.77.10"
	labEmptyIP    = "10.96.77.11"
	labTCPPort    = 80
	labUDPPort    = 53
	labNodePort   = 30777
	labTargetPort = 8080
)

func (l *netnsLab) ns(role string) string { return l.prefix + "-" + role }

func (l *netnsLab) run(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (l *netnsLab) exec(role string, args ...string) {
	l.t.Helper()
	l.run(append([]string{"ip", "netns", "exec", l.ns(role)}, args...)...)
}

func newNetnsLab(t *testing.T) *netnsLab {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs the ip tool")
	}
	l := &netnsLab{t: t, prefix: fmt.Sprintf("mzp%d", os.Getpid())}
	for _, role := range []string{"node", "client", "ep1", "ep2"} {
		l.run("ip", "netns", "add", l.ns(role))
		role := role
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", l.ns(role)).Run() })
	}
	l.exec("node", "sysctl", "-qw", "net.ipv4.ip_forward=1")
	link := func(role, nodeAddr, peerAddr string) {
		nodeSide := l.prefix + role[:2] + role[len(role)-1:]
		l.run("ip", "link", "add", nodeSide, "netns", l.ns("node"), "type", "veth", "peer", "name", "eth0", "netns", l.ns(role))
		l.exec("node", "ip", "addr", "add", nodeAddr, "dev", nodeSide)
		l.exec("node", "ip", "link", "set", nodeSide, "up")
		l.exec(role, "ip", "addr", "add", peerAddr, "dev", "eth0")
		l.exec(role, "ip", "link", "set", "eth0", "up")
		l.exec(role, "ip", "link", "set", "lo", "up")
		l.exec(role, "ip", "route", "add", "default", "via", strings.Split(nodeAddr, "/")[0])
	}
	l.exec("node", "ip", "link", "set", "lo", "up")
	link("client", labNodeIP.String()+"/24", labClientIP.String()+"/24")
	link("ep1", "10.77.1.1/24", labEP1.String()+"/24")
	link("ep2", "10.77.2.1/24", labEP2.String()+"/24")
	// Like a real node, the lab's node has a default route, so that service IPs are
	// routable before any rule rewrites them: here out of an uplink that goes nowhere.
	l.exec("node", "ip", "link", "add", "uplink", "type", "veth", "peer", "name", "uplink-end")
	l.exec("node", "ip", "addr", "add", "203.0.113.1/24", "dev", "uplink")
	l.exec("node", "ip", "link", "set", "uplink", "up")
	l.exec("node", "ip", "link", "set", "uplink-end", "up")
	l.exec("node", "ip", "route", "add", "default", "via", "203.0.113.254")
	return l
}

// in runs fn with the calling thread in the role's namespace; sockets made there stay
// in it afterwards.
func (l *netnsLab) in(role string, fn func()) {
	l.t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		l.t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + l.ns(role))
	if err != nil {
		l.t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		l.t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(err) // a thread left in a test namespace must not serve other goroutines
		}
	}()
	fn()
}

// serve starts TCP and UDP servers in an endpoint's namespace that answer with the
// endpoint's name and the source address they saw.
func (l *netnsLab) serve(role string) {
	var tl net.Listener
	var ul net.PacketConn
	l.in(role, func() {
		var err error
		if tl, err = net.Listen("tcp4", fmt.Sprintf(":%d", labTargetPort)); err != nil {
			l.t.Fatal(err)
		}
		if ul, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", labTargetPort)); err != nil {
			l.t.Fatal(err)
		}
	})
	l.t.Cleanup(func() { tl.Close(); ul.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s %s\n", role, host)
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := ul.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			_, _ = ul.WriteTo([]byte(role+" "+host), from)
		}
	}()
}

// dial connects from role's namespace and returns the answer: the endpoint's name and
// the source it saw.
func (l *netnsLab) dial(role, network, addr string) (string, error) {
	var conn net.Conn
	var err error
	l.in(role, func() { conn, err = net.DialTimeout(network, addr, 5*time.Second) })
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if network == "udp4" {
		if _, err := conn.Write([]byte("hello")); err != nil {
			return "", err
		}
		buf := make([]byte, 512)
		n, err := conn.Read(buf)
		return string(buf[:n]), err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

func labService(name, ip string, svcType v1.ServiceType) *v1.Service {
	return &v1.Service{
		ObjectMeta: metaNS("lab", name),
		Spec: v1.ServiceSpec{Type: svcType, ClusterIP: ip, Ports: []v1.ServicePort{
			{Name: "http", Protocol: v1.ProtocolTCP, Port: int32(labTCPPort), NodePort: int32(labNodePort)},
			{Name: "dns", Protocol: v1.ProtocolUDP, Port: int32(labUDPPort)},
		}},
	}
}

func labSlice(service string, ips ...netip.Addr) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metaNS("lab", service+"-abc"),
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr("http"), Protocol: ptr(v1.ProtocolTCP), Port: ptr(int32(labTargetPort))},
			{Name: ptr("dns"), Protocol: ptr(v1.ProtocolUDP), Port: ptr(int32(labTargetPort))},
		},
	}
	s.Labels = map[string]string{discoveryv1.LabelServiceName: service}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip.String()}, NodeName: ptr("elsewhere")})
	}
	return s
}

// TestRulesInNetworkNamespaces applies the rules in a namespace playing the node and
// drives real TCP and UDP traffic through them.
func TestRulesInNetworkNamespaces(t *testing.T) {
	l := newNetnsLab(t)
	l.serve("ep1")
	l.serve("ep2")
	nsFile, err := os.Open("/run/netns/" + l.ns("node"))
	if err != nil {
		t.Fatal(err)
	}
	defer nsFile.Close()
	tbl := Table{NetNS: int(nsFile.Fd())}
	in := Input{
		Services: []*v1.Service{
			labService("web", labClusterIP, v1.ServiceTypeNodePort),
			labService("empty", labEmptyIP, v1.ServiceTypeClusterIP),
		},
		EndpointSlices:    []*discoveryv1.EndpointSlice{labSlice("web", labEP1, labEP2)},
		NodeName:          "node",
		NodePortAddresses: []netip.Addr{labNodeIP},
		ClusterCIDR:       labCluster,
	}
	if err := tbl.Apply(Build(in)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("ip", "netns", "exec", l.ns("node"), "nft", "list", "table", "ip", TableName).CombinedOutput()
			t.Logf("rules:\n%s", out)
		}
	})

	hostPort := func(host string, port int) string { return net.JoinHostPort(host, fmt.Sprint(port)) }
	clusterTCP := hostPort(labClusterIP, labTCPPort)
	clusterUDP := hostPort(labClusterIP, labUDPPort)
	nodePort := hostPort(labNodeIP.String(), labNodePort)
	// The node's address on each endpoint's link: the source an endpoint sees for
	// masqueraded traffic.
	nodeSide := map[string]string{"ep1": "10.77.1.1", "ep2": "10.77.2.1"}
	for _, tc := range []struct {
		name, from, network, addr string
		// wantSource is the source an endpoint sees; "node" means the node's address on
		// the endpoint's link (masqueraded).
		wantSource string
	}{
		{"ClusterIP TCP from outside the cluster CIDR is masqueraded", "client", "tcp4", clusterTCP, "node"},
		{"ClusterIP UDP from outside the cluster CIDR is masqueraded", "client", "udp4", clusterUDP, "node"},
		{"ClusterIP TCP from the node itself (output hook)", "node", "tcp4", clusterTCP, "node"},
		{"ClusterIP TCP from a pod keeps the pod's address", "ep1", "tcp4", clusterTCP, labEP1.String()},
		{"NodePort TCP is masqueraded", "client", "tcp4", nodePort, "node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			for range 24 {
				answer, err := l.dial(tc.from, tc.network, tc.addr)
				if err != nil {
					t.Fatalf("%s %s from %s: %v", tc.network, tc.addr, tc.from, err)
				}
				name, source, _ := strings.Cut(answer, " ")
				want := tc.wantSource
				if want == "node" {
					want = nodeSide[name]
				}
				if name == "ep1" && tc.from == "ep1" {
					want = nodeSide[name] // hairpin: a pod reaching itself is masqueraded
				}
				if source != want {
					t.Fatalf("%s answered seeing source %q, want %q", name, source, want)
				}
				seen[name] = true
			}
			// 24 random picks miss one of two endpoints with probability 2^-23.
			if !seen["ep1"] || !seen["ep2"] {
				t.Fatalf("24 connections reached %v, want both endpoints", seen)
			}
		})
	}

	t.Run("a service without endpoints rejects at once", func(t *testing.T) {
		for _, network := range []string{"tcp4", "udp4"} {
			port := labTCPPort
			if network == "udp4" {
				port = labUDPPort
			}
			for _, from := range []string{"client", "node"} {
				_, err := l.dial(from, network, hostPort(labEmptyIP, port))
				// A datagram the node's own socket sends is refused in the output hook,
				// before it leaves: the send fails with EPERM, as under upstream's rules.
				if !errors.Is(err, syscall.ECONNREFUSED) && !(from == "node" && network == "udp4" && errors.Is(err, syscall.EPERM)) {
					t.Errorf("%s to the empty service from %s: %v, want connection refused", network, from, err)
				}
			}
		}
	})
	t.Run("an unknown port of a ClusterIP rejects", func(t *testing.T) {
		if _, err := l.dial("client", "tcp4", labClusterIP+":81"); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("got %v, want connection refused", err)
		}
	})

	t.Run("loadBalancerSourceRanges drop other sources", func(t *testing.T) {
		lb := labService("lb", "10.96.77.13", v1.ServiceTypeLoadBalancer)
		lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.50"}}
		withLB := in
		withLB.Services = append(append([]*v1.Service(nil), in.Services...), lb)
		withLB.EndpointSlices = append(append([]*discoveryv1.EndpointSlice(nil), in.EndpointSlices...), labSlice("lb", labEP1))
		lbAddr := hostPort("198.51.100.50", labTCPPort)
		for _, tc := range []struct {
			ranges  []string
			reaches bool
		}{
			{[]string{"192.168.77.0/24"}, true},
			{[]string{"10.77.0.0/16", "203.0.113.9/32"}, false},
			{nil, true}, // no ranges: open to all
		} {
			lb.Spec.LoadBalancerSourceRanges = tc.ranges
			if err := tbl.Apply(Build(withLB)); err != nil {
				t.Fatal(err)
			}
			var err error
			var conn net.Conn
			l.in("client", func() { conn, err = net.DialTimeout("tcp4", lbAddr, time.Second) })
			if err == nil {
				conn.Close()
			}
			if (err == nil) != tc.reaches {
				t.Errorf("ranges %v: dialing the load balancer IP from the client: %v, want reached %t", tc.ranges, err, tc.reaches)
			}
		}
		if err := tbl.Apply(Build(in)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a UDP flow to a removed endpoint moves once its conntrack entry is cleared", func(t *testing.T) {
		in.EndpointSlices = []*discoveryv1.EndpointSlice{labSlice("web", labEP2)}
		if err := tbl.Apply(Build(in)); err != nil {
			t.Fatal(err)
		}
		var conn net.Conn
		var err error
		l.in("client", func() { conn, err = net.Dial("udp4", clusterUDP) })
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// ask sends a datagram from the same source port each time: one conntrack entry.
		ask := func() string {
			t.Helper()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 512)
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(string(buf[:n]), " ")
			return name
		}
		if got := ask(); got != "ep2" {
			t.Fatalf("first datagram answered by %s, want ep2", got)
		}
		in.EndpointSlices = []*discoveryv1.EndpointSlice{labSlice("web", labEP1)}
		rs := Build(in)
		if err := tbl.Apply(rs); err != nil {
			t.Fatal(err)
		}
		// The kernel keeps the flow's DNAT: this is what clearing is for.
		if got := ask(); got != "ep2" {
			t.Fatalf("before clearing, answered by %s; the flow was expected to stick to ep2", got)
		}
		if err := (Conntrack{NetNS: int(nsFile.Fd())}).ClearUDPTo(map[netip.AddrPort]bool{
			netip.AddrPortFrom(labEP2, uint16(labTargetPort)): true,
		}); err != nil {
			t.Fatal(err)
		}
		if got := ask(); got != "ep1" {
			t.Fatalf("after clearing, answered by %s, want ep1", got)
		}
	})

	t.Run("sessionAffinity keeps a client on one endpoint across writes", func(t *testing.T) {
		sticky := labService("sticky", "10.96.77.12", v1.ServiceTypeClusterIP)
		sticky.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		in.Services = append(in.Services, sticky)
		in.EndpointSlices = []*discoveryv1.EndpointSlice{labSlice("web", labEP1, labEP2), labSlice("sticky", labEP1, labEP2)}
		if err := tbl.Apply(Build(in)); err != nil {
			t.Fatal(err)
		}
		stickyTCP := hostPort("10.96.77.12", labTCPPort)
		first := ""
		for i := range 24 {
			if i == 12 {
				// A write in between (here: the same rules again) keeps what the
				// affinity sets remember.
				rs := Build(in)
				if err := tbl.Apply(rs); err != nil {
					t.Fatal(err)
				}
				if remembered := affinityClients(t, int(nsFile.Fd()), rs); !remembered[labClientIP] {
					t.Fatalf("after the write the affinity sets hold %v, want the client %s", remembered, labClientIP)
				}
			}
			answer, err := l.dial("client", "tcp4", stickyTCP)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(answer, " ")
			if first == "" {
				first = name
			} else if name != first {
				t.Fatalf("connection %d reached %s, the first reached %s", i, name, first)
			}
		}
	})

	t.Run("a removed endpoint gets no new connections", func(t *testing.T) {
		in.EndpointSlices = []*discoveryv1.EndpointSlice{labSlice("web", labEP1)}
		rs := Build(in)
		if err := tbl.Apply(rs); err != nil {
			t.Fatal(err)
		}
		// The table holds exactly the new chains: the removed endpoints' are gone.
		conn, err := nftables.New(nftables.WithNetNSFd(int(nsFile.Fd())))
		if err != nil {
			t.Fatal(err)
		}
		chains, err := conn.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, c := range chains {
			if c.Table.Name == TableName {
				got = append(got, c.Name)
			}
		}
		for _, c := range rs.Chains {
			want = append(want, c.Name)
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("chains in the kernel:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, addr := range []string{clusterTCP, nodePort} {
			for range 16 {
				answer, err := l.dial("client", "tcp4", addr)
				if err != nil {
					t.Fatal(err)
				}
				if name, _, _ := strings.Cut(answer, " "); name != "ep1" {
					t.Fatalf("%s reached %s after it was removed", addr, name)
				}
			}
		}
	})

	t.Run("cleanup removes the table", func(t *testing.T) {
		if err := tbl.Delete(); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Delete(); err != nil {
			t.Fatalf("deleting a missing table: %v", err)
		}
		out, err := exec.Command("ip", "netns", "exec", l.ns("node"), "nft", "list", "tables").CombinedOutput()
		if err != nil {
			t.Skipf("nft: %v %s", err, out)
		}
		if strings.Contains(string(out), TableName) {
			t.Fatalf("table still listed:\n%s", out)
		}
	})
}

// affinityClients reads the client addresses the ruleset's affinity sets hold in the
// kernel.
func affinityClients(t *testing.T, netns int, rs *Ruleset) map[netip.Addr]bool {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(netns))
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	out := map[netip.Addr]bool{}
	for _, s := range rs.Sets {
		if s.Timeout == 0 {
			continue
		}
		elems, err := conn.GetSetElements(&nftables.Set{Table: tbl, Name: s.Name, KeyType: nftables.TypeIPAddr})
		if err != nil {
			t.Fatalf("set %s: %v", s.Name, err)
		}
		for _, e := range elems {
			if a, ok := netip.AddrFromSlice(e.Key); ok {
				out[a] = true
			}
		}
	}
	return out
}

func metaNS(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func ptr[T any](v T) *T { return &v }
