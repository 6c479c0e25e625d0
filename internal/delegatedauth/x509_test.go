package delegatedauth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"mizzen/internal/pki"
)

// issue is a client certificate of ca for user in groups, as a TLS peer presents it.
func issue(t *testing.T, ca *pki.CA, user string, groups ...string) *x509.Certificate {
	t.Helper()
	issued, err := ca.IssueClient(user, groups)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(issued.CertPEM)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func TestAuthenticateRequest(t *testing.T) {
	cas := map[string]*pki.CA{}
	for _, name := range []string{"cluster", "front", "other"} {
		ca, err := pki.LoadOrCreateCA(t.TempDir(), "ca", name+"-ca")
		if err != nil {
			t.Fatal(err)
		}
		cas[name] = ca
	}
	auth := &CertAuthenticator{ClientCAs: cas["cluster"].Pool(), RequestHeader: &RequestHeaderConfig{
		CAs: cas["front"].Pool(), AllowedNames: []string{"front-proxy-client"},
		UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"}, ExtraPrefixes: []string{"X-Remote-Extra-"},
	}}
	forwarded := http.Header{
		"X-Remote-User":                     {"alice"},
		"X-Remote-Group":                    {"devs", "system:authenticated"},
		"X-Remote-Extra-Scopes":             {"a", "b"},
		"X-Remote-Extra-Example.com%2fteam": {"x"},
	}
	for _, tc := range []struct {
		name    string
		auth    *CertAuthenticator
		cert    *x509.Certificate
		headers http.Header
		want    *User
		refused bool // an error (401), not merely no user (anonymous)
	}{
		{"no certificate", auth, nil, forwarded, nil, false},
		{"the front proxy forwards a user", auth, issue(t, cas["front"], "front-proxy-client"), forwarded,
			&User{Name: "alice", Groups: []string{"devs", "system:authenticated"}, Extra: map[string][]string{"scopes": {"a", "b"}, "example.com/team": {"x"}}}, false},
		{"the front proxy without a user header", auth, issue(t, cas["front"], "front-proxy-client"), http.Header{}, nil, false},
		{"a front-proxy certificate of a name not allowed", auth, issue(t, cas["front"], "someone"), forwarded, nil, true},
		{"a cluster client certificate cannot forward a user", auth, issue(t, cas["cluster"], "bob", "ops"), forwarded,
			&User{Name: "bob", Groups: []string{"ops", "system:authenticated"}}, false},
		{"a certificate of an unknown CA", auth, issue(t, cas["other"], "front-proxy-client"), forwarded, nil, true},
		{"no CA known: a certificate is ignored", &CertAuthenticator{}, issue(t, cas["other"], "bob"), nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/apis", nil)
			r.Header = tc.headers.Clone()
			r.TLS = &tls.ConnectionState{}
			if tc.cert != nil {
				r.TLS.PeerCertificates = []*x509.Certificate{tc.cert}
			}
			got, ok, err := tc.auth.AuthenticateRequest(r)
			if (err != nil) != tc.refused {
				t.Errorf("err = %v, want refused %v", err, tc.refused)
			}
			if tc.want == nil {
				if ok {
					t.Errorf("authenticated as %+v, want none", got)
				}
				return
			}
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (%v), want %+v", got, ok, tc.want)
			}
		})
	}
}
