// Package hostaddr finds the machine's primary address: the one a node registers as its
// InternalIP and an apiserver bound to every interface advertises to pods.
package hostaddr

import (
	"errors"
	"net"
)

// PrimaryIPv4 is the first global unicast IPv4 address of the first interface that is
// up and not a loopback.
func PrimaryIPv4() (net.IP, error) {
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
