package local

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"mizzen/internal/cloud"
)

// netnsHandle returns a netlink handle into a new, anonymous network namespace with a
// veth pair, one end holding 192.168.152.1/24; the namespace goes when the test ends.
func netnsHandle(t *testing.T) *netlink.Handle {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); ns.Close() })
	link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "mznc-va"}, PeerName: "mznc-vb"}
	if err := h.LinkAdd(link); err != nil {
		t.Fatal(err)
	}
	if peer, err := h.LinkByName("mznc-vb"); err == nil {
		_ = h.LinkSetUp(peer)
	}
	addr, _ := netlink.ParseAddr("192.168.152.1/24")
	if err := h.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRoutesThroughNetlink(t *testing.T) {
	h := netnsHandle(t)
	ctx := context.Background()
	r := newRoutes(RouteOptions{ClusterCIDR: netip.MustParsePrefix("10.152.0.0/16"), Handle: h})
	// A route of someone else's, within the cluster CIDR: never listed nor touched.
	_, foreign, _ := net.ParseCIDR("10.152.7.0/24")
	if err := h.RouteAdd(&netlink.Route{Dst: foreign, Gw: net.ParseIP("192.168.152.7")}); err != nil {
		t.Fatal(err)
	}
	to := func(ip string) []v1.NodeAddress { return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}} }
	if err := r.CreateRoute(ctx, "k", "uid-2", &cloud.Route{TargetNode: "n2", TargetNodeAddresses: to("192.168.152.2"), DestinationCIDR: "10.152.2.0/24"}); err != nil {
		t.Fatal(err)
	}
	// This machine's own pod CIDR needs no route.
	if err := r.CreateRoute(ctx, "k", "uid-1", &cloud.Route{TargetNode: "n1", TargetNodeAddresses: to("192.168.152.1"), DestinationCIDR: "10.152.1.0/24"}); err != nil {
		t.Fatal(err)
	}
	// A gateway off every link is the kernel's error, returned.
	if err := r.CreateRoute(ctx, "k", "uid-3", &cloud.Route{TargetNode: "n3", TargetNodeAddresses: to("198.51.100.3"), DestinationCIDR: "10.152.3.0/24"}); err == nil {
		t.Error("a route through an unreachable gateway was accepted")
	}
	routes, err := r.ListRoutes(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// This machine's own pod CIDR is listed without a kernel route, so that it is not
	// asked for again.
	slices.SortFunc(routes, func(a, b *cloud.Route) int { return strings.Compare(a.DestinationCIDR, b.DestinationCIDR) })
	if len(routes) != 2 || routes[0].DestinationCIDR != "10.152.1.0/24" || routes[1].DestinationCIDR != "10.152.2.0/24" ||
		internalIP(routes[1].TargetNodeAddresses).String() != "192.168.152.2" {
		t.Fatalf("routes %+v, want 10.152.1.0/24 (this machine's) and 10.152.2.0/24 via 192.168.152.2", routes)
	}
	if kernel, _ := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: RouteProtocol}, netlink.RT_FILTER_PROTOCOL); len(kernel) != 1 {
		t.Errorf("kernel routes %+v, want one", kernel)
	}
	if err := r.DeleteRoute(ctx, "k", routes[0]); err != nil {
		t.Fatal(err)
	}
	routes = routes[1:]
	kernel, _ := h.RouteGet(net.ParseIP("10.152.2.9"))
	if len(kernel) != 1 || !kernel[0].Gw.Equal(net.ParseIP("192.168.152.2")) {
		t.Errorf("the kernel routes 10.152.2.9 via %+v", kernel)
	}
	if err := r.DeleteRoute(ctx, "k", routes[0]); err != nil {
		t.Fatal(err)
	}
	if routes, _ := r.ListRoutes(ctx, "k"); len(routes) != 0 {
		t.Errorf("routes after deletion: %+v", routes)
	}
	if list, _ := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: foreign}, netlink.RT_FILTER_DST); len(list) != 1 {
		t.Errorf("someone else's route was touched: %+v", list)
	}
}
