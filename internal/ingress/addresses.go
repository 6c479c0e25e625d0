package ingress

import (
	"fmt"
	"net"
	"strconv"

	"mizzen/internal/hostaddr"
)

// Addresses turns ports and addresses into the controller's listen addresses
// (a zero port serves nothing) and the address its Ingresses' status names.
func Addresses(bind string, httpPort, httpsPort int, status string) (httpAddr, httpsAddr, statusAddr string, err error) {
	ip := net.ParseIP(bind)
	if ip == nil {
		return "", "", "", fmt.Errorf("--bind-address %q is not an IP address", bind)
	}
	for _, p := range []int{httpPort, httpsPort} {
		if p < 0 || p > 65535 {
			return "", "", "", fmt.Errorf("port %d is not a port", p)
		}
	}
	if httpPort == 0 && httpsPort == 0 {
		return "", "", "", fmt.Errorf("neither an HTTP nor an HTTPS port to serve")
	}
	if httpPort > 0 {
		httpAddr = net.JoinHostPort(bind, strconv.Itoa(httpPort))
	}
	if httpsPort > 0 {
		httpsAddr = net.JoinHostPort(bind, strconv.Itoa(httpsPort))
	}
	statusAddr = status
	if statusAddr == "" {
		statusAddr = bind
		if ip.IsUnspecified() {
			primary, err := hostaddr.PrimaryIPv4()
			if err != nil {
				return "", "", "", fmt.Errorf("--publish-status-address: %w", err)
			}
			statusAddr = primary.String()
		}
	}
	return httpAddr, httpsAddr, statusAddr, nil
}
