package dns

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/hostservice"
)

// The Service pods reach cluster DNS through, named as upstream's clusters name it.
const (
	ServiceNamespace = "kube-system"
	ServiceName      = "kube-dns"
	managedBy        = "mizzen-dns"
)

// ServiceIP is the cluster DNS address of a service CIDR, its 10th address, as kubeadm
// chooses it (10.96.0.10 in 10.96.0.0/12): kubelets are given it as --cluster-dns.
func ServiceIP(serviceCIDR string) (net.IP, error) {
	_, n, err := net.ParseCIDR(serviceCIDR)
	if err != nil || n.IP.To4() == nil {
		return nil, fmt.Errorf("service CIDR %q: an IPv4 CIDR is required", serviceCIDR)
	}
	out := make(net.IP, 4)
	binary.BigEndian.PutUint32(out, binary.BigEndian.Uint32(n.IP.To4())+10)
	if !n.Contains(out) {
		return nil, fmt.Errorf("service CIDR %s is too small for the DNS address", serviceCIDR)
	}
	return out, nil
}

// Publish makes a DNS server listening at addr on a host reachable as the kube-dns
// Service at serviceIP, port 53 over UDP and TCP, beside the DNS servers of the other
// hosts: Start the returned Publisher to keep this host in the Service.
func Publish(ctx context.Context, client kubernetes.Interface, serviceIP net.IP, addr net.Addr, log *slog.Logger) (*hostservice.Publisher, error) {
	host, port, err := hostPort(addr)
	if err != nil {
		return nil, err
	}
	return hostservice.Publish(ctx, client, hostservice.Spec{
		Namespace: ServiceNamespace, Name: ServiceName, ClusterIP: serviceIP.String(),
		Labels: map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
		Ports: []hostservice.Port{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: port},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: port},
		},
		Address: host, ManagedBy: managedBy,
	}, log)
}

func hostPort(addr net.Addr) (net.IP, int32, error) {
	switch a := addr.(type) {
	case *net.UDPAddr:
		return a.IP, int32(a.Port), nil
	case *net.TCPAddr:
		return a.IP, int32(a.Port), nil
	}
	return nil, 0, fmt.Errorf("DNS server address %v: not an IP address and port", addr)
}
