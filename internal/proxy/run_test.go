package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// recorder keeps the rulesets Run writes.
type recorder struct {
	mu     sync.Mutex
	last   string
	writes int
}

func (r *recorder) Apply(rs *Ruleset) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last, r.writes = rs.String(), r.writes+1
	return nil
}

// clearedConntrack records the UDP endpoints Run asks to clear.
type clearedConntrack struct {
	mu      sync.Mutex
	cleared map[netip.AddrPort]bool
}

func (c *clearedConntrack) ClearUDPTo(eps map[netip.AddrPort]bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ep := range eps {
		c.cleared[ep] = true
	}
	return nil
}

func (c *clearedConntrack) has(ep netip.AddrPort) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cleared[ep]
}

func (r *recorder) rules() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// waitRules polls until the written rules satisfy ok.
func waitRules(t *testing.T, r *recorder, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok(r.rules()) {
		if time.Now().After(deadline) {
			t.Fatalf("rules never showed %s; last written:\n%s", what, r.rules())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunFollowsTheAPI checks that Run rewrites the rules as Services, EndpointSlices
// and the node change.
func TestRunFollowsTheAPI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "node-a"}, {Type: v1.NodeInternalIP, Address: "192.168.5.10"},
	}}}
	other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "192.168.5.11"},
	}}}
	svc := labService("web", "10.96.0.10", v1.ServiceTypeNodePort)
	// A service another proxy implementation claims gets no rules from this one.
	claimed := labService("claimed", "10.96.0.99", v1.ServiceTypeClusterIP)
	claimed.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "other-proxy"}
	client := fake.NewClientset(node, other, svc, claimed)
	rec := &recorder{}
	ct := &clearedConntrack{cleared: map[netip.AddrPort]bool{}}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Client: client, NodeName: "node-a", MinSyncPeriod: 10 * time.Millisecond, Writer: rec, Conntrack: ct})
	}()

	waitRules(t, rec, "the service rejecting without endpoints, NodePorts on the node's primary IP only", func(s string) bool {
		return strings.Contains(s, "10.96.0.10 . tcp . 80 : goto reject-chain") &&
			strings.Contains(s, "elements = { 192.168.5.10 }")
	})
	slice := labSlice("web", labEP1, labEP2)
	if _, err := client.DiscoveryV1().EndpointSlices("lab").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRules(t, rec, "both endpoints", func(s string) bool {
		return strings.Contains(s, "10.96.0.10 . tcp . 80 : goto service-") && strings.Contains(s, "numgen random mod 2")
	})
	slice.Endpoints = slice.Endpoints[:1]
	if _, err := client.DiscoveryV1().EndpointSlices("lab").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRules(t, rec, "one endpoint left", func(s string) bool {
		return strings.Contains(s, "numgen random mod 1") && !strings.Contains(s, fmt.Sprintf("dnat to %s:", labEP2))
	})
	// The removed endpoint's UDP flows are cleared, the remaining one's are not.
	removedUDP, keptUDP := netip.AddrPortFrom(labEP2, uint16(labTargetPort)), netip.AddrPortFrom(labEP1, uint16(labTargetPort))
	if !ct.has(removedUDP) || ct.has(keptUDP) {
		t.Errorf("cleared UDP conntrack entries: %v %t, %v %t; want the first only", removedUDP, ct.has(removedUDP), keptUDP, ct.has(keptUDP))
	}
	if strings.Contains(rec.rules(), "10.96.0.99") {
		t.Errorf("a service claimed by another proxy got rules:\n%s", rec.rules())
	}
	if err := client.CoreV1().Services("lab").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRules(t, rec, "no service left", func(s string) bool { return !strings.Contains(s, "10.96.0.10") })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestNodePortAddresses(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "203.0.113.4"},
		{Type: v1.NodeInternalIP, Address: "fd00::4"},
		{Type: v1.NodeInternalIP, Address: "192.168.5.10"},
		{Type: v1.NodeInternalIP, Address: "192.168.5.11"},
	}}}
	externalOnly := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeExternalIP, Address: "203.0.113.5"},
	}}}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range []*v1.Node{node, externalOnly} {
		if err := indexer.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		node     string
		flag     []string
		want     []string
		allLocal bool
	}{
		{name: "default: the node's first IPv4 InternalIP", node: "node-a", want: []string{"192.168.5.10"}},
		{name: "primary spelled out", node: "node-a", flag: []string{"primary"}, want: []string{"192.168.5.10"}},
		{name: "an ExternalIP when there is no InternalIP", node: "node-b", want: []string{"203.0.113.5"}},
		{name: "an unknown node has none yet", node: "node-c"},
		{name: "a CIDR takes the local addresses in it", node: "node-a", flag: []string{"127.0.0.0/8"}, want: []string{"127.0.0.1"}},
		{name: "0.0.0.0/0 is every local address", node: "node-a", flag: []string{"0.0.0.0/0"}, allLocal: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &syncer{opts: Options{NodeName: tc.node, NodePortAddresses: tc.flag, Log: slog.Default()},
				nodes: corelisters.NewNodeLister(indexer)}
			addrs, all := s.nodePortAddresses()
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || all != tc.allLocal {
				t.Errorf("got %v (all local %t), want %v (all local %t)", got, all, tc.want, tc.allLocal)
			}
		})
	}
	if err := ParseNodePortAddresses([]string{"10.0.0.0/8", "primary"}); err != nil {
		t.Errorf("valid values refused: %v", err)
	}
	if err := ParseNodePortAddresses([]string{"10.0.0.1"}); err == nil {
		t.Error("an address without a prefix length was accepted")
	}
}
