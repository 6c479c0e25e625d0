// Package hostaddr finds the machine's primary address: the one a node registers as its
// InternalIP and an apiserver bound to every interface advertises to pods.
package hostaddr

import (
	"errors"
	"net"

	"github.com/vishvananda/netlink"
)

// PrimaryIPv4 is the source address of the default route, as upstream's kubelet picks
// its node IP; without one, the first global unicast IPv4 address of the first
// interface that is up and not a loopback. (Interface order alone is not enough: a
// bridge or vxlan device made in a fresh network namespace comes before its eth0.)
func PrimaryIPv4() (net.IP, error) {
	if routes, err := netlink.RouteGet(net.IPv4(1, 1, 1, 1)); err == nil && len(routes) > 0 {
		if src := routes[0].Src.To4(); src != nil && src.IsGlobalUnicast() {
			return src, nil
		}
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("no global unicast IPv4 address")
}
