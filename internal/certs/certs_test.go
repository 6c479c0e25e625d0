package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/pki"
)

// writeExpiring writes tls/name.{crt,key}: a client certificate of ca that expires in left.
func writeExpiring(t *testing.T, d datadir.Dir, ca *pki.CA, name, user string, left time.Duration) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: user, Organization: []string{"g1"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(left),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	cert, keyFile := d.Cert(name)
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, all []Cert, file string) Cert {
	t.Helper()
	for _, c := range all {
		if c.File == file {
			return c
		}
	}
	t.Fatalf("%s not listed", file)
	return Cert{}
}

func TestCheckAndRotate(t *testing.T) {
	d := datadir.Dir(t.TempDir())
	ca, err := pki.LoadOrCreateCA(d.TLS(), datadir.CAName, "mizzen-ca")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ca.LoadOrIssueClient(d.TLS(), "admin", "system:admin", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.WriteKubeconfig(d.AdminKubeconfig(), "https://127.0.0.1:1", ca.CertPEM, admin, "admin"); err != nil {
		t.Fatal(err)
	}
	writeExpiring(t, d, ca, "scheduler", "system:kube-scheduler", 30*24*time.Hour)
	caBefore, _ := os.ReadFile(d.CACert())

	now := time.Now()
	all, err := List(d)
	if err != nil {
		t.Fatal(err)
	}
	if c := find(t, all, "tls/scheduler.crt"); c.Status(now) != "RENEW" || c.User != "system:kube-scheduler" || !slices.Equal(c.Groups, []string{"g1"}) {
		t.Fatalf("expiring: %+v %s", c, c.Status(now))
	}
	if c := find(t, all, "tls/ca.crt"); !c.IsCA || c.Status(now) != "OK" {
		t.Fatalf("ca: %+v", c)
	}
	if c := find(t, all, "admin.kubeconfig"); c.User != "system:admin" || !slices.Equal(c.Groups, []string{"system:masters"}) || c.Status(now) != "OK" {
		t.Fatalf("kubeconfig: %+v", c)
	}
	if c := (Cert{Expires: now.Add(-time.Minute)}); c.Status(now) != "EXPIRED" {
		t.Fatal("an expired certificate is not EXPIRED")
	}

	if _, err := Rotate(d, []string{"nope"}); err == nil {
		t.Fatal("an unknown service was accepted")
	}
	rotated, err := Rotate(d, []string{"scheduler"})
	if err != nil || !slices.Equal(rotated, []string{"scheduler"}) {
		t.Fatalf("rotated %v: %v", rotated, err)
	}
	all, _ = List(d)
	if c := find(t, all, "tls/scheduler.crt"); c.Status(now) != "OK" || c.User != "system:kube-scheduler" || !slices.Equal(c.Groups, []string{"g1"}) ||
		c.cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatalf("after rotate: %+v", c)
	}
	if c := find(t, all, "tls/admin.crt"); !bytes.Equal(c.cert.Raw, mustParse(t, admin.CertPEM).Raw) {
		t.Fatal("admin rotated though not named")
	}

	rotated, err = Rotate(d, nil)
	if err != nil || !slices.Contains(rotated, "admin") || slices.Contains(rotated, "ca") {
		t.Fatalf("rotated %v: %v", rotated, err)
	}
	cfg, err := clientcmd.LoadFromFile(d.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	inKubeconfig := mustParse(t, cfg.AuthInfos["admin"].ClientCertificateData)
	onDisk, _ := os.ReadFile(filepath.Join(d.TLS(), "admin.crt"))
	if inKubeconfig.Equal(mustParse(t, admin.CertPEM)) || !inKubeconfig.Equal(mustParse(t, onDisk)) || inKubeconfig.CheckSignatureFrom(ca.Cert) != nil {
		t.Fatal("the admin kubeconfig does not carry the new certificate of the same CA")
	}
	if caAfter, _ := os.ReadFile(d.CACert()); !bytes.Equal(caBefore, caAfter) || !bytes.Equal(cfg.Clusters["mizzen"].CertificateAuthorityData, caBefore) {
		t.Fatal("the CA changed")
	}
	// The server keeps a rotated client certificate: it is still the one it asks for.
	kept, err := ca.LoadOrIssueClient(d.TLS(), "admin", "system:admin", []string{"system:masters"})
	if err != nil || !mustParse(t, kept.CertPEM).Equal(inKubeconfig) {
		t.Fatalf("the server would reissue the rotated certificate: %v", err)
	}
}

func mustParse(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	c, err := parsePEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestListsTheNodesCertificates: a joined node's certificates issued through CSRs
// (a -current.pem file, key and certificate together) are listed, also on a data
// directory with no tls/ (an agent's), and never rotated: the kubelet renews them.
func TestListsTheNodesCertificates(t *testing.T) {
	d := datadir.Dir(t.TempDir())
	ca, err := pki.LoadOrCreateCA(filepath.Join(t.TempDir(), "elsewhere"), datadir.CAName, "mizzen-ca")
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.IssueClient("system:node:n1", []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.KubeletPKI(), 0o700); err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(d.KubeletPKI(), "kubelet-client-current.pem")
	if err := os.WriteFile(pemFile, append(slices.Clone(issued.KeyPEM), issued.CertPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	all, err := List(d)
	if err != nil {
		t.Fatalf("an agent's data directory: %v", err)
	}
	if c := find(t, all, "agent/kubelet/pki/kubelet-client-current.pem"); c.User != "system:node:n1" || !slices.Equal(c.Groups, []string{"system:nodes"}) {
		t.Fatalf("node certificate: %+v", c)
	}
	before, _ := os.ReadFile(pemFile)
	if _, err := Rotate(d, []string{"kubelet-client-current"}); err == nil {
		t.Fatal("a CSR-issued certificate was accepted as a service to rotate")
	}
	if rotated, err := Rotate(d, nil); err != nil || len(rotated) != 0 {
		t.Fatalf("rotate all on an agent: %v %v", rotated, err)
	}
	if after, _ := os.ReadFile(pemFile); !bytes.Equal(before, after) {
		t.Fatal("the node's certificate was rewritten")
	}
	if _, err := List(datadir.Dir(t.TempDir())); err == nil {
		t.Fatal("an empty directory listed")
	}
}
