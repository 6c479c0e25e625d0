package pki

import (
	"crypto/x509"
	"fmt"
)

// Reissue signs a new certificate (new key, new serial, a year from now) for what old
// was for: its subject, names, addresses and extended usages. old must be this CA's.
func (ca *CA) Reissue(old *x509.Certificate) (*Issued, error) {
	if err := old.CheckSignatureFrom(ca.Cert); err != nil {
		return nil, fmt.Errorf("%s was not signed by CA %s: %w", old.Subject.CommonName, ca.Cert.Subject.CommonName, err)
	}
	return ca.issue(&x509.Certificate{
		Subject:     old.Subject,
		DNSNames:    old.DNSNames,
		IPAddresses: old.IPAddresses,
		ExtKeyUsage: old.ExtKeyUsage,
	})
}
