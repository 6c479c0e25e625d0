package delegatedauth

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"

	"mizzen/internal/pki"
)

func clientCert(t *testing.T, ca *pki.CA, user string, groups []string) tls.Certificate {
	t.Helper()
	issued, err := ca.IssueClient(user, groups)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := issued.TLS()
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func TestAuthenticate(t *testing.T) {
	dir := t.TempDir()
	cluster, err := pki.LoadOrCreateCA(filepath.Join(dir, "cluster"), "ca", "cluster-ca")
	if err != nil {
		t.Fatal(err)
	}
	front, err := pki.LoadOrCreateCA(filepath.Join(dir, "front"), "ca", "front-proxy-ca")
	if err != nil {
		t.Fatal(err)
	}
	cas := struct{ cluster, frontProxy *pki.CA }{cluster, front}
	auth := &CertAuthenticator{ClientCAs: cluster.Pool(), RequestHeader: &RequestHeaderConfig{
		CAs: front.Pool(), AllowedNames: []string{"front-proxy-client"},
		UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraPrefixes: []string{"X-Remote-Extra-"},
	}}
	other, err := pki.LoadOrCreateCA(t.TempDir(), "ca", "other")
	if err != nil {
		t.Fatal(err)
	}
	forwarded := http.Header{
		"X-Remote-User":                     {"alice"},
		"X-Remote-Group":                    {"devs", "system:authenticated"},
		"X-Remote-Extra-Scopes":             {"a", "b"},
		"X-Remote-Extra-Example.com%2fteam": {"x"},
	}
	for _, tc := range []struct {
		name    string
		cert    *tls.Certificate
		headers http.Header
		want    *User
	}{
		{"no certificate", nil, forwarded, nil},
		{"the front proxy forwards a user", ptr(clientCert(t, cas.frontProxy, "front-proxy-client", nil)), forwarded,
			&User{Name: "alice", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a", "b"}, "example.com/team": {"x"}}}},
		{"the front proxy without a user header", ptr(clientCert(t, cas.frontProxy, "front-proxy-client", nil)), http.Header{}, nil},
		{"a front-proxy certificate of a name not allowed", ptr(clientCert(t, cas.frontProxy, "someone", nil)), forwarded, nil},
		{"a cluster client certificate cannot forward a user", ptr(clientCert(t, cas.cluster, "bob", []string{"ops"})), forwarded,
			&User{Name: "bob", Groups: []string{"ops", "system:authenticated"}}},
		{"a certificate of an unknown CA", ptr(clientCert(t, other, "front-proxy-client", nil)), forwarded, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/apis", nil)
			r.Header = tc.headers.Clone()
			r.TLS = &tls.ConnectionState{}
			if tc.cert != nil {
				leaf, err := x509.ParseCertificate(tc.cert.Certificate[0])
				if err != nil {
					t.Fatal(err)
				}
				r.TLS.PeerCertificates = []*x509.Certificate{leaf}
			}
			got, ok := auth.Authenticate(r)
			if tc.want == nil {
				if ok {
					t.Errorf("authenticated as %+v, want refused", got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (%v), want %+v", got, ok, tc.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
