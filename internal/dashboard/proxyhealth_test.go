package dashboard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProxyHealthOf(t *testing.T) {
	for _, c := range []struct {
		name string
		code int
		body string
		want proxyHealth
	}{
		{"healthy", 200, `{"lastUpdated":"2026-12-01T10:00:00Z","currentTime":"2026-12-01T10:00:05Z","nodeEligible":true}`,
			proxyHealth{Reachable: true, Healthy: true, LastUpdated: "2026-12-01T10:00:00Z", Code: 200}},
		{"stale", 503, `{"lastUpdated":"2026-12-01T10:00:00Z","currentTime":"2026-12-01T10:05:00Z","nodeEligible":true}`,
			proxyHealth{Reachable: true, LastUpdated: "2026-12-01T10:00:00Z", Code: 503, Message: "a change waits to be written"}},
		{"refused by RBAC", 403, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"n1\" is forbidden: User \"u\" cannot get resource \"nodes/proxy\"","reason":"Forbidden","code":403}`,
			proxyHealth{Code: 403, Message: `nodes "n1" is forbidden: User "u" cannot get resource "nodes/proxy"`}},
		{"port not answering", 503, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"error trying to reach service: dial tcp 10.0.0.1:10256: connect: connection refused","reason":"ServiceUnavailable","code":503}`,
			proxyHealth{Code: 503, Message: "error trying to reach service: dial tcp 10.0.0.1:10256: connect: connection refused"}},
		{"something else on the port", 404, `<html>not found</html>`, proxyHealth{Code: 404, Message: "404: <html>not found</html>"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := proxyHealthOf(c.code, []byte(c.body)); got != c.want {
				t.Errorf("proxyHealthOf(%d, %s) = %+v, want %+v", c.code, c.body, got, c.want)
			}
		})
	}
}

func TestProxyHealthNeedsASession(t *testing.T) {
	d := &dashboard{settings: settings{ProxyHealthzPort: 10256}}
	req, _ := http.NewRequest(http.MethodGet, "/proxyhealth/n1", nil)
	rec := httptest.NewRecorder()
	d.serveProxyHealth(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("without a session: %d, want 401", rec.Code)
	}
}
