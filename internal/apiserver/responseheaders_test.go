package apiserver_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"k8s.io/client-go/rest"

	"mizzen/internal/testing/apiserver"
)

// TestEveryResponseNamesItsAuditID: as upstream's, every response carries an Audit-Id
// header: the request's own when it sent one, else a new UUID for each request,
// refusals of unauthenticated requests included; and, but where a handler sets its
// own, Cache-Control "no-cache, private".
func TestEveryResponseNamesItsAuditID(t *testing.T) {
	cfg := apiserver.Start(t)
	admin, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	anonCfg := rest.AnonymousClientConfig(cfg)
	anon, err := rest.HTTPClientFor(anonCfg)
	if err != nil {
		t.Fatal(err)
	}
	var getHeader func(c *http.Client, path, sent string) (int, http.Header)
	get := func(c *http.Client, path, sent string) (int, string) {
		code, h := getHeader(c, path, sent)
		return code, h.Get("Audit-Id")
	}
	getHeader = func(c *http.Client, path, sent string) (int, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if sent != "" {
			req.Header.Set("Audit-ID", sent)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	seen := map[string]bool{}
	for _, path := range []string{"/api/v1/namespaces", "/api/v1/namespaces/default/pods/none", "/version"} {
		code, id := get(admin, path, "")
		if _, err := uuid.Parse(id); err != nil || seen[id] {
			t.Errorf("GET %s (%d): Audit-Id %q, want a new UUID", path, code, id)
		}
		seen[id] = true
	}
	if _, id := get(admin, "/api/v1/namespaces", "my-request-7"); id != "my-request-7" {
		t.Errorf("Audit-Id %q, want the request's own my-request-7", id)
	}
	code, id := get(anon, "/api/v1/secrets", "")
	if code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("anonymous list of secrets: %d", code)
	}
	if _, err := uuid.Parse(id); err != nil {
		t.Errorf("anonymous refusal (%d): Audit-Id %q, want a UUID", code, id)
	}
	for path, want := range map[string]string{
		"/api/v1/namespaces":                   "no-cache, private",
		"/api/v1/namespaces/default/pods/none": "no-cache, private",
		"/version":                             "no-cache, private",
		"/openapi/v2":                          "no-cache, private",
	} {
		if _, h := getHeader(admin, path, ""); h.Get("Cache-Control") != want {
			t.Errorf("GET %s: Cache-Control %q, want %q", path, h.Get("Cache-Control"), want)
		}
	}
}
