package nodecert_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/agent/nodecert"
	"mizzen/internal/controller/csr"
	"mizzen/internal/controllermanager"
	"mizzen/internal/testing/apiserver"
)

func TestRotationDeadline(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &x509.Certificate{NotBefore: start, NotAfter: start.Add(100 * time.Hour)}
	for range 200 {
		d := nodecert.RotationDeadline(c)
		if d.Before(start.Add(70*time.Hour)) || d.After(start.Add(90*time.Hour)) {
			t.Fatalf("deadline %s is outside 70%%..90%% of the lifetime", d.Sub(start))
		}
	}
}

// TestManagerRotates: a stored certificate past its rotation deadline is replaced
// through a CSR while the manager runs, and the callback hands out the new one.
func TestManagerRotates(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmCfg, err := srv.ComponentConfig("controller-manager", "system:kube-controller-manager", nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(ctx, cmCfg, controllermanager.RunOptions{
			Options:                      controllermanager.Options{ConcurrentSyncs: 1, ClusterSigningCertFile: srv.CAFile(), ClusterSigningKeyFile: srv.CAKeyFile()},
			Controllers:                  []string{"csrapproving", "csrsigning"},
			UseServiceAccountCredentials: true,
		})
	}()
	defer func() { cancel(); <-done }()

	// A client certificate for the node, most of whose life is gone.
	ca, err := csr.LoadCA(srv.CAFile(), srv.CAKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	key, err := nodecert.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	subject := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(7), Subject: subject,
		NotBefore: now.Add(-50 * time.Minute), NotAfter: now.Add(5 * time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	if _, err := nodecert.Save(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key); err != nil {
		t.Fatal(err)
	}
	var rotated atomic.Int32
	m := &nodecert.Manager{
		Path: path, Signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		Template: func(context.Context) (*x509.CertificateRequest, error) {
			return &x509.CertificateRequest{Subject: subject}, nil
		},
		OnRotate: func() { rotated.Add(1) },
	}
	if !m.LoadExisting() {
		t.Fatal("the stored certificate was not taken")
	}
	// The node renews as itself, with the certificate in use (selfnodeclient).
	m.Client = func() (kubernetes.Interface, error) {
		cfg, err := srv.ComponentConfig("node-n1", "system:node:n1", []string{"system:nodes"})
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(cfg)
	}
	go m.Run(ctx)
	deadline := time.Now().Add(30 * time.Second)
	for rotated.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not renewed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	got, err := m.GetClientCertificate(nil)
	if err != nil || got.Leaf.SerialNumber.Cmp(big.NewInt(7)) == 0 || !got.Leaf.NotAfter.After(now.Add(time.Hour)) {
		t.Fatalf("after rotation the callback gives %v (expires %v), %v", got.Leaf.SerialNumber, got.Leaf.NotAfter, err)
	}
	stored, err := nodecert.Load(path)
	if err != nil || stored.Leaf.SerialNumber.Cmp(got.Leaf.SerialNumber) != 0 {
		t.Errorf("the stored certificate is not the new one: %v", err)
	}
}
