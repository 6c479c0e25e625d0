package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"mizzen/internal/pki"
)

// LoadCertificate returns the serving certificate from certFile and keyFile when given,
// else a self-signed one kept in dir (created on first use, as upstream's kubelet keeps
// kubelet.crt and kubelet.key under its pki directory).
func LoadCertificate(certFile, keyFile, dir, hostname string) (tls.Certificate, error) {
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return tls.Certificate{}, errors.New("--tls-cert-file and --tls-private-key-file go together")
		}
		return tls.LoadX509KeyPair(certFile, keyFile)
	}
	certPath, keyPath := filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	if pair, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		return pair, nil
	}
	ca, err := pki.LoadOrCreateCA(dir, "kubelet-ca", hostname+"-ca")
	if err != nil {
		return tls.Certificate{}, err
	}
	issued, err := ca.IssueServing(hostname, []string{hostname, "localhost"}, hostIPs())
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := issued.Write(certPath, keyPath); err != nil {
		return tls.Certificate{}, err
	}
	return issued.TLS()
}

// LoadClientCAs reads the PEM bundle that callers' certificates are verified against.
// Without one no caller can authenticate, and every request is refused.
func LoadClientCAs(file string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if file == "" {
		return pool, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--client-ca-file %s: no certificates", file)
	}
	return pool, nil
}

// hostIPs are the machine's addresses, for the serving certificate.
func hostIPs() []net.IP {
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ips
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
			ips = append(ips, ipn.IP)
		}
	}
	return ips
}
