package volume

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func (f *fakeSources) ClusterTrustBundle(_ context.Context, name string) (*certificatesv1.ClusterTrustBundle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.bundles {
		if f.bundles[i].Name == name {
			return &f.bundles[i], nil
		}
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundles"), name)
}

func (f *fakeSources) ClusterTrustBundles(_ context.Context, signerName string) ([]certificatesv1.ClusterTrustBundle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []certificatesv1.ClusterTrustBundle
	for _, b := range f.bundles {
		if b.Spec.SignerName == signerName {
			out = append(out, b)
		}
	}
	return out, nil
}

func (f *fakeSources) CreatePodCertificateRequest(_ context.Context, pod *v1.Pod, req *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	req = req.DeepCopy()
	req.Name = fmt.Sprintf("%s%d", req.GenerateName, len(f.requests))
	req.Spec.NodeName, req.Spec.NodeUID = "node-a", "node-uid"
	f.requests[req.Namespace+"/"+req.Name] = req
	return req, nil
}

func (f *fakeSources) PodCertificateRequest(_ context.Context, ns, name string) (*certificatesv1.PodCertificateRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.requests[ns+"/"+name]; ok {
		return r.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(certificatesv1.Resource("podcertificaterequests"), name)
}

// selfSignedCA is a CA certificate as PEM, as upstream's conformance specs make them.
func selfSignedCA(t *testing.T, cn string) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestClusterTrustBundleProjection(t *testing.T) {
	m, src, _ := newTestManager(t)
	root := make([]string, 5)
	for i := range root {
		root[i] = selfSignedCA(t, fmt.Sprintf("root%d", i))
	}
	ctb := func(name, signer, pem string, labels map[string]string) certificatesv1.ClusterTrustBundle {
		return certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pem}}
	}
	src.bundles = []certificatesv1.ClusterTrustBundle{
		ctb("plain", "", root[0], nil),
		ctb("example.com:one:a", "example.com/one", root[1], map[string]string{"alive": "true"}),
		ctb("example.com:one:b", "example.com/one", root[2]+root[1], map[string]string{"alive": "false"}),
		ctb("example.com:two:a", "example.com/two", root[3], map[string]string{"alive": "true"}),
	}
	everything := &metav1.LabelSelector{}
	cases := []struct {
		name    string
		proj    v1.ClusterTrustBundleProjection
		want    string // the file's content
		wantErr string
	}{
		{name: "by name", proj: v1.ClusterTrustBundleProjection{Name: ptr.To("plain")}, want: root[0]},
		{name: "missing name", proj: v1.ClusterTrustBundleProjection{Name: ptr.To("nope")}, wantErr: `clustertrustbundles.certificates.k8s.io "nope" not found`},
		{name: "missing optional name is an empty file", proj: v1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Optional: ptr.To(true)}, want: ""},
		{name: "a signer's bundles matching labels", proj: v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}}, want: root[1]},
		{name: "every bundle of a signer, each certificate once", proj: v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"),
			LabelSelector: everything}, want: root[1] + root[2]},
		{name: "a nil selector matches nothing", proj: v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one")},
			wantErr: `combined trust anchor set for signer "example.com/one" and selector was empty`},
		{name: "nothing matching, optional", proj: v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "unknown"}}, Optional: ptr.To(true)}, want: ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.proj.Path = "bundle.pem"
			pod := testPod(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				Sources: []v1.VolumeProjection{{ClusterTrustBundle: &tc.proj}}}}})
			pod.UID = k8stypes.UID(fmt.Sprint("uid-ctb-", i))
			mounted, err := m.SetUp(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := visible(t, mounted["vol"].Path)
			if want := fmt.Sprintf("-rw-r--r-- %q", tc.want); got["bundle.pem"] != want || len(got) != 1 {
				t.Errorf("files = %v, want bundle.pem %s", got, want)
			}
		})
	}
}

// TestPodCertificateProjection: the volume waits for the signer, then holds the key
// and chain; a denied request is followed by a new one.
func TestPodCertificateProjection(t *testing.T) {
	m, src, clk := newTestManager(t)
	proj := &v1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ECDSAP256",
		CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem",
		UserAnnotations: map[string]string{"example.com/path": "/x"}}
	pod := testPod(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{PodCertificate: proj}}}}})
	ctx := context.Background()

	if _, err := m.SetUp(ctx, pod); err == nil || !strings.Contains(err.Error(), "has not been issued yet") {
		t.Fatalf("first set-up: err = %v, want not issued yet", err)
	}
	if len(src.requests) != 1 {
		t.Fatalf("requests = %d, want 1", len(src.requests))
	}
	var req *certificatesv1.PodCertificateRequest
	for _, r := range src.requests {
		req = r
	}
	if req.Spec.PodName != "web" || req.Spec.PodUID != pod.UID || req.Spec.SignerName != proj.SignerName || req.Spec.UnverifiedUserAnnotations["example.com/path"] != "/x" {
		t.Errorf("request spec = %+v", req.Spec)
	}
	csr, err := x509.ParseCertificateRequest(req.Spec.StubPKCS10Request)
	if err != nil || csr.CheckSignature() != nil {
		t.Fatalf("stub request: %v", err)
	}
	if _, ok := csr.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Fatalf("public key %T, want ECDSA", csr.PublicKey)
	}
	// Still pending: no second request.
	if _, err := m.SetUp(ctx, pod); err == nil || len(src.requests) != 1 {
		t.Fatalf("pending set-up: err = %v, requests = %d", err, len(src.requests))
	}

	// The signer issues a certificate for the request's key.
	caKey, caCert := testCA(t)
	now := clk.Now()
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "web"}, NotBefore: now, NotAfter: now.Add(2 * time.Hour)}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, csr.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	chain := "junk between blocks\n" + string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}))
	src.mu.Lock()
	req.Status = certificatesv1.PodCertificateRequestStatus{CertificateChain: chain,
		Conditions:     []metav1.Condition{{Type: "Issued", Status: metav1.ConditionTrue, Reason: "Signed"}},
		NotBefore:      ptr.To(metav1.NewTime(now)),
		BeginRefreshAt: ptr.To(metav1.NewTime(now.Add(time.Hour))),
		NotAfter:       ptr.To(metav1.NewTime(now.Add(2 * time.Hour)))}
	src.mu.Unlock()
	mounted, err := m.SetUp(ctx, pod)
	if err != nil {
		t.Fatalf("issued set-up: %v", err)
	}
	dir := mounted["vol"].Path
	bundle, err := os.ReadFile(filepath.Join(dir, "bundle.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(bundle, bundle); err != nil {
		t.Errorf("credential bundle is not a key pair: %v\n%s", err, bundle)
	}
	chainFile, _ := os.ReadFile(filepath.Join(dir, "chain.pem"))
	if strings.Contains(string(chainFile), "junk") || !strings.HasPrefix(string(chainFile), "-----BEGIN CERTIFICATE-----") {
		t.Errorf("chain file = %q", chainFile)
	}
	keyFile, _ := os.ReadFile(filepath.Join(dir, "key.pem"))
	if !strings.HasPrefix(string(keyFile), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("key file = %q", keyFile)
	}

	// Past beginRefreshAt a new request is filed and the old credentials stay.
	clk.Step(time.Hour + time.Minute)
	if _, err := m.SetUp(ctx, pod); err != nil {
		t.Fatalf("refresh set-up: %v", err)
	}
	if len(src.requests) != 2 {
		t.Fatalf("requests after refresh = %d, want 2", len(src.requests))
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "bundle.pem")); string(again) != string(bundle) {
		t.Error("the credentials changed before the new request was issued")
	}
}

func TestPodCertificateDenied(t *testing.T) {
	m, src, _ := newTestManager(t)
	pod := testPod(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		Sources: []v1.VolumeProjection{{PodCertificate: &v1.PodCertificateProjection{SignerName: "example.com/signer", KeyType: "ED25519", CredentialBundlePath: "b.pem"}}}}}})
	ctx := context.Background()
	if _, err := m.SetUp(ctx, pod); err == nil {
		t.Fatal("set-up before issuance succeeded")
	}
	for _, r := range src.requests {
		r.Status.Conditions = []metav1.Condition{{Type: "Denied", Status: metav1.ConditionTrue, Reason: "UnsupportedKeyType", Message: "use ECDSAP256"}}
	}
	if _, err := m.SetUp(ctx, pod); err == nil || !strings.Contains(err.Error(), "was Denied: UnsupportedKeyType: use ECDSAP256") {
		t.Fatalf("err = %v, want the denial", err)
	}
	if _, err := m.SetUp(ctx, pod); err == nil || len(src.requests) != 2 {
		t.Fatalf("after a denial: err = %v, requests = %d, want a new request", err, len(src.requests))
	}
}

func testCA(t *testing.T) (ed25519.PrivateKey, *x509.Certificate) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return priv, cert
}
