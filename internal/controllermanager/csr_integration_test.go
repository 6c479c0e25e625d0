package controllermanager_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"mizzen/internal/agent/nodecert"
	"mizzen/internal/controllermanager"
	"mizzen/internal/jointoken"
	"mizzen/internal/testing/apiserver"
)

var (
	clientUsages  = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	servingUsages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth}
)

// request files a CSR and waits up to wait for its certificate.
func request(t *testing.T, c kubernetes.Interface, tmpl *x509.CertificateRequest, signer string, usages []certificatesv1.KeyUsage, wait time.Duration) (*x509.Certificate, []byte, error) {
	t.Helper()
	key, err := nodecert.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	certPEM, err := nodecert.Request(ctx, c, key, tmpl, signer, usages)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	return cert, append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...), nil
}

// TestCSRApprovingAndSigning: a bootstrap token files its node's client CSR, which
// is approved and issued; the node then gets a serving certificate for its own
// addresses only; anything else stays pending with an event saying why.
func TestCSRApprovingAndSigning(t *testing.T) {
	srv := apiserver.StartServer(t)
	ctx := context.Background()
	admin := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	startCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(startCtx, managerConfig(t, srv), controllermanager.RunOptions{
			Options: controllermanager.Options{ConcurrentSyncs: 2,
				ClusterSigningCertFile: srv.CAFile(), ClusterSigningKeyFile: srv.CAKeyFile()},
			Controllers:                  []string{"csrapproving", "csrsigning", "csrcleaner", "tokencleaner"},
			UseServiceAccountCredentials: true,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	caPEM := srv.AdminConfig.TLSClientConfig.CAData
	tok, err := jointoken.Create(ctx, admin, caPEM, jointoken.Options{Role: jointoken.RoleAgent, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	bootCfg := rest.AnonymousClientConfig(srv.AdminConfig)
	bootCfg.BearerToken = tok.Bearer()
	boot := kubernetes.NewForConfigOrDie(bootCfg)

	nodeSubject := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	cert, pair, err := request(t, boot, &x509.CertificateRequest{Subject: nodeSubject}, certificatesv1.KubeAPIServerClientKubeletSignerName, clientUsages, 30*time.Second)
	if err != nil {
		t.Fatalf("the node's client certificate: %v", err)
	}
	if cert.Subject.CommonName != "system:node:n1" || len(cert.ExtKeyUsage) != 1 || cert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("issued %v with %v", cert.Subject, cert.ExtKeyUsage)
	}
	nodeCfg := rest.AnonymousClientConfig(srv.AdminConfig)
	nodeCfg.CertData, nodeCfg.KeyData = pair, pair
	node := kubernetes.NewForConfigOrDie(nodeCfg)
	who, err := node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the node registering with its issued certificate: %v", err)
	}
	who.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}, {Type: corev1.NodeHostName, Address: "n1"}}
	if _, err := node.CoreV1().Nodes().UpdateStatus(ctx, who, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Its serving certificate, for its own name and address.
	serving := &x509.CertificateRequest{Subject: nodeSubject, DNSNames: []string{"n1"}, IPAddresses: []net.IP{net.ParseIP("10.1.2.3")}}
	cert, _, err = request(t, node, serving, certificatesv1.KubeletServingSignerName, servingUsages, 30*time.Second)
	if err != nil {
		t.Fatalf("the node's serving certificate: %v", err)
	}
	if cert.DNSNames[0] != "n1" || !cert.IPAddresses[0].Equal(net.ParseIP("10.1.2.3")) {
		t.Errorf("serving certificate for %v %v", cert.DNSNames, cert.IPAddresses)
	}
	// A node renews its own client certificate (selfnodeclient).
	if _, _, err := request(t, node, &x509.CertificateRequest{Subject: nodeSubject}, certificatesv1.KubeAPIServerClientKubeletSignerName, clientUsages, 30*time.Second); err != nil {
		t.Fatalf("renewing the client certificate: %v", err)
	}

	// Left pending: another address, another node's name, a bootstrapper asking for
	// more than a node's identity, a node asking for another node's client cert.
	for _, tc := range []struct {
		name, signer string
		client       kubernetes.Interface
		tmpl         *x509.CertificateRequest
		usages       []certificatesv1.KeyUsage
		why          string
	}{
		{"serving for another address", certificatesv1.KubeletServingSignerName, node,
			&x509.CertificateRequest{Subject: nodeSubject, IPAddresses: []net.IP{net.ParseIP("10.9.9.9")}}, servingUsages, "IP 10.9.9.9 is not one of node n1's addresses"},
		{"serving for another node", certificatesv1.KubeletServingSignerName, node,
			&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n2", Organization: []string{"system:nodes"}}, DNSNames: []string{"n2"}}, servingUsages, `only the node "system:node:n2" itself`},
		{"client as system:masters", certificatesv1.KubeAPIServerClientKubeletSignerName, boot,
			&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n3", Organization: []string{"system:masters"}}}, clientUsages, "subject organization is not system:nodes"},
		{"client for another node", certificatesv1.KubeAPIServerClientKubeletSignerName, node,
			&x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n2", Organization: []string{"system:nodes"}}}, clientUsages, "may not create certificatesigningrequests/nodeclient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := request(t, tc.client, tc.tmpl, tc.signer, tc.usages, 4*time.Second)
			if err == nil || !strings.Contains(err.Error(), "waiting for certificate signing request") {
				t.Fatalf("got %v, want it left pending", err)
			}
			name := strings.Fields(strings.TrimPrefix(err.Error(), "waiting for certificate signing request "))[0]
			csr, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
			if err != nil || len(csr.Status.Conditions) != 0 {
				t.Fatalf("CSR %s: %v %v, want pending", name, csr.Status.Conditions, err)
			}
			events, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, e := range events.Items {
				msgs = append(msgs, e.Reason+": "+e.Message)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.why) {
				t.Errorf("events of %s: %q, want one saying %q", name, msgs, tc.why)
			}
		})
	}

	// The token cleaner deletes an expired token.
	expired, _ := jointoken.Generate(caPEM)
	s, _ := expired.BootstrapSecret(jointoken.Options{Role: jointoken.RoleAgent, TTL: time.Minute}, time.Now().Add(-time.Hour))
	if _, err := admin.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the expired token's Secret is deleted", func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Secrets("kube-system").Get(ctx, s.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := admin.CoreV1().Secrets("kube-system").Get(ctx, jointoken.SecretPrefix+tok.ID, metav1.GetOptions{}); err != nil {
		t.Errorf("the valid token's Secret: %v", err)
	}
}
