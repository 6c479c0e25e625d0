// Package podnet connects the pod networks of a cluster's nodes, as flannel does: a
// component of every agent follows the Nodes and programs this machine so that every
// other node's spec.podCIDR is reachable, either by a route through the other node's
// InternalIP (host-gw, the nodes on one L2 segment) or through a VXLAN overlay (one
// vxlan device per node whose MAC is published in the Node's annotations, with a
// forwarding entry, a neighbour entry and a route for every other node). What it cannot
// reach is said on the Node: its NetworkUnavailable condition and a Warning event.
package podnet

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Mode is the backend: --pod-network host-gw|vxlan|none.
type Mode string

const (
	// VXLAN is the overlay that works wherever the nodes reach each other by UDP.
	VXLAN Mode = "vxlan"
	// HostGW routes each node's pod CIDR through its InternalIP: no encapsulation, but
	// every node must be on one L2 segment.
	HostGW Mode = "host-gw"
	// None programs nothing: the pod network across nodes is someone else's job.
	None Mode = "none"
)

// Modes are the accepted values of --pod-network.
var Modes = []Mode{VXLAN, HostGW, None}

// ParseMode checks a --pod-network value.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("--pod-network %q: want one of vxlan, host-gw, none", s)
}

// The annotations a node publishes for the others in vxlan mode.
const (
	// AnnotationBackend names the node's backend.
	AnnotationBackend = "podnet.mizzen.io/backend-type"
	// AnnotationVTEPMAC is the MAC address of the node's vxlan device.
	AnnotationVTEPMAC = "podnet.mizzen.io/vtep-mac"
	// AnnotationPublicIP is the address other nodes send the node's VXLAN packets to.
	AnnotationPublicIP = "podnet.mizzen.io/public-ip"
)

// Defaults of the vxlan backend: flannel's VNI and the Linux kernel's VXLAN port.
const (
	DefaultVNI  = 1
	DefaultPort = 8472
	// vxlanOverhead is what the encapsulation adds to a packet (outer IPv4, UDP,
	// VXLAN and Ethernet headers).
	vxlanOverhead = 50
)

// DeviceName is the vxlan device of the pod network behind bridge: named after the
// bridge so that clusters sharing a host (tests) keep apart.
func DeviceName(bridge string) string {
	if bridge == "" {
		bridge = "mizzen0"
	}
	if len(bridge) > 12 {
		bridge = bridge[:12]
	}
	return bridge + ".vx"
}

// vtepAddr is a node's address on the overlay: its pod CIDR's network address, as
// flannel gives its flannel.1 device (the bridge has the first address).
func vtepAddr(podCIDR netip.Prefix) netip.Addr { return podCIDR.Masked().Addr() }

// PodMTU is the MTU pods should have in mode: the overlay's encapsulation taken off the
// MTU of the link to the default route (or of the first link up), 0 (the CNI plugin's
// default) otherwise.
func PodMTU(mode Mode) int {
	if mode != VXLAN {
		return 0
	}
	mtu := 1500
	if routes, err := netlink.RouteGet(net.IPv4(1, 1, 1, 1)); err == nil && len(routes) > 0 {
		if link, err := netlink.LinkByIndex(routes[0].LinkIndex); err == nil {
			mtu = link.Attrs().MTU
		}
	}
	return mtu - vxlanOverhead
}

// RemoveDevice deletes the vxlan device of the pod network behind bridge, if any (for
// `mizzen killall`): its forwarding entries and routes go with it.
func RemoveDevice(bridge string) error {
	link, err := netlink.LinkByName(DeviceName(bridge))
	if err != nil {
		return nil // none
	}
	return netlink.LinkDel(link)
}
