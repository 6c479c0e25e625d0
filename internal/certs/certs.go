// Package certs inspects and renews the certificates of a data directory, as k3s's
// `certificate check` and `certificate rotate`: every certificate under DIR/tls, the
// client certificates inside the kubeconfigs, and the node's certificates issued through
// CSRs (listed only: the kubelet renews those itself), renewed from the CA that signed
// them (never a new CA), so kubeconfigs trusting the cluster CA keep working.
package certs

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/pki"
)

// Cert is one certificate found in a data directory.
type Cert struct {
	// File is the path under the data directory; a kubeconfig's is "NAME.kubeconfig".
	File string
	// Service is the name rotate knows it by: the file's path under tls/ without .crt,
	// or the kubeconfig's name.
	Service string
	User    string
	Groups  []string
	Usages  []string
	IsCA    bool
	Expires time.Time
	cert    *x509.Certificate
}

// Status is OK, "RENEW" when it expires within pki.RenewBefore (the server renews it at
// its next start), or EXPIRED.
func (c Cert) Status(now time.Time) string {
	switch {
	case now.After(c.Expires):
		return "EXPIRED"
	case now.Add(pki.RenewBefore).After(c.Expires):
		return "RENEW"
	}
	return "OK"
}

// Due reports whether the certificate is to be renewed (expired, or expiring within
// pki.RenewBefore).
func (c Cert) Due(now time.Time) bool { return c.Status(now) != "OK" }

func usages(c *x509.Certificate) []string {
	var out []string
	if c.IsCA {
		out = append(out, "CA")
	}
	for _, u := range c.ExtKeyUsage {
		switch u {
		case x509.ExtKeyUsageServerAuth:
			out = append(out, "ServerAuth")
		case x509.ExtKeyUsageClientAuth:
			out = append(out, "ClientAuth")
		}
	}
	return out
}

func fromX509(file, service string, c *x509.Certificate) Cert {
	return Cert{File: file, Service: service, User: c.Subject.CommonName, Groups: c.Subject.Organization,
		Usages: usages(c), IsCA: c.IsCA, Expires: c.NotAfter, cert: c}
}

// parsePEM parses the first certificate in data (a -current.pem file holds the key too).
func parsePEM(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			return nil, errors.New("no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// List returns every certificate under DIR/tls, then the node's under its kubelet's
// pki directory, then the client certificate of every kubeconfig in DIR, each sorted
// by file. Only those under DIR/tls are rotated (their Service is their path there).
func List(d datadir.Dir) ([]Cert, error) {
	root := d.Root()
	_, noTLS := os.Stat(d.TLS())
	_, noPKI := os.Stat(d.KubeletPKI())
	if noTLS != nil && noPKI != nil {
		return nil, fmt.Errorf("no certificates in %s: %w", root, noTLS)
	}
	var out []Cert
	for _, dir := range []string{d.TLS(), d.KubeletPKI()} {
		err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return nil
			}
			if err != nil || e.IsDir() || (!strings.HasSuffix(path, ".crt") && !strings.HasSuffix(path, ".pem")) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			c, err := parsePEM(data)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			rel, _ := filepath.Rel(root, path)
			service := ""
			if dir == d.TLS() {
				service, _ = filepath.Rel(dir, path)
				service = strings.TrimSuffix(service, ".crt")
			}
			out = append(out, fromX509(rel, service, c))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	kubeconfigs, _ := filepath.Glob(filepath.Join(root, "*.kubeconfig"))
	sort.Strings(kubeconfigs)
	for _, path := range kubeconfigs {
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, name := range sortedKeys(cfg.AuthInfos) {
			ai := cfg.AuthInfos[name]
			data := ai.ClientCertificateData
			if len(data) == 0 && ai.ClientCertificate != "" {
				if data, err = os.ReadFile(ai.ClientCertificate); err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
			}
			if len(data) == 0 {
				continue
			}
			c, err := parsePEM(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			base := filepath.Base(path)
			out = append(out, fromX509(base, strings.TrimSuffix(base, ".kubeconfig"), c))
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Rotate reissues the certificates of the named services (every one when none is
// named) from the CAs that signed them, writing the new certificate and key where the
// old ones were, and the kubeconfig of the same name with the new client certificate.
// CA certificates are never rotated. It returns the services rotated.
func Rotate(d datadir.Dir, services []string) ([]string, error) {
	all, err := List(d)
	if err != nil {
		return nil, err
	}
	cas, err := loadCAs(d, all)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, c := range all {
		if rotatable(c) {
			known[c.Service] = true
		}
	}
	for _, s := range services {
		if !known[s] && !known[strings.TrimSuffix(s, "/")] && !hasPrefix(known, s+"/") {
			return nil, fmt.Errorf("--service %q: no such certificate (known: %s)", s, strings.Join(sortedKeys(known), ", "))
		}
	}
	want := func(service string) bool {
		if len(services) == 0 {
			return true
		}
		for _, s := range services {
			if service == s || strings.HasPrefix(service, s+"/") {
				return true
			}
		}
		return false
	}
	var rotated []string
	for _, c := range all {
		if !rotatable(c) || !want(c.Service) {
			continue
		}
		ca := signer(cas, c.cert)
		if ca == nil {
			return rotated, fmt.Errorf("%s: signed by none of the data directory's CAs", c.File)
		}
		issued, err := ca.Reissue(c.cert)
		if err != nil {
			return rotated, err
		}
		certFile := filepath.Join(d.Root(), c.File)
		keyFile := strings.TrimSuffix(certFile, ".crt") + ".key"
		if err := writeAtomic(keyFile, issued.KeyPEM, 0o600); err != nil {
			return rotated, err
		}
		if err := writeAtomic(certFile, issued.CertPEM, 0o644); err != nil {
			return rotated, err
		}
		if err := updateKubeconfig(d.Kubeconfig(c.Service), c.cert, issued); err != nil {
			return rotated, err
		}
		rotated = append(rotated, c.Service)
	}
	return rotated, nil
}

// rotatable reports whether Rotate renews c: a certificate of DIR/tls other than a CA.
// The node's CSR-issued certificates are the kubelet's to renew, and a kubeconfig's
// follows its file in DIR/tls.
func rotatable(c Cert) bool {
	return !c.IsCA && c.Service != "" && strings.HasSuffix(c.File, ".crt")
}

func hasPrefix(m map[string]bool, prefix string) bool {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// loadCAs loads every CA certificate of the data directory with its key.
func loadCAs(d datadir.Dir, all []Cert) ([]*pki.CA, error) {
	var cas []*pki.CA
	for _, c := range all {
		if !c.IsCA || !strings.HasSuffix(c.File, ".crt") {
			continue
		}
		path := filepath.Join(d.Root(), c.File)
		if _, err := os.Stat(strings.TrimSuffix(path, ".crt") + ".key"); err != nil {
			continue // a CA bundle without its key signs nothing here
		}
		ca, err := pki.LoadCA(filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), ".crt"))
		if err != nil {
			return nil, err
		}
		cas = append(cas, ca)
	}
	return cas, nil
}

func signer(cas []*pki.CA, c *x509.Certificate) *pki.CA {
	for _, ca := range cas {
		if c.CheckSignatureFrom(ca.Cert) == nil {
			return ca
		}
	}
	return nil
}

// updateKubeconfig puts the reissued client certificate into the kubeconfig at path in
// place of old, when there is such a kubeconfig using it.
func updateKubeconfig(path string, old *x509.Certificate, issued *pki.Issued) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	changed := false
	for _, ai := range cfg.AuthInfos {
		// The kubeconfig of the same name carries this certificate, or (rewritten by the
		// server since) another one for the same user.
		if c, err := parsePEM(ai.ClientCertificateData); err == nil && (c.Equal(old) || c.Subject.CommonName == old.Subject.CommonName) {
			ai.ClientCertificateData, ai.ClientKeyData = issued.CertPEM, issued.KeyPEM
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return clientcmd.WriteToFile(*cfg, path)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
