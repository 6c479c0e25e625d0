package integration

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"mizzen/internal/jointoken"
	"mizzen/internal/serverjoin"
	"mizzen/internal/testing/apiserver"
)

// TestClusterInfoAndServerJoinOnASingleServer: kube-public/cluster-info is readable
// without credentials and names the cluster's CA, as a joining machine needs, while
// every other object still needs credentials; a single server (no --cluster-init)
// refuses to hand its secrets to a joining server, even with a valid server token,
// and says why.
func TestClusterInfoAndServerJoinOnASingleServer(t *testing.T) {
	srv := apiserver.StartWithOptions(t, nil)
	ctx := context.Background()
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	get := func(path string) (int, string) {
		resp, err := anonymous.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/api/v1/namespaces/kube-public/configmaps/cluster-info"); code != http.StatusOK || !strings.Contains(body, "certificate-authority-data") {
		t.Errorf("anonymous cluster-info: %d %s", code, body)
	}
	for _, path := range []string{"/api/v1/namespaces/kube-public/configmaps", "/api/v1/namespaces/kube-system/secrets"} {
		// As upstream with anonymous requests on: system:anonymous, refused by RBAC.
		if code, body := get(path); code != http.StatusForbidden {
			t.Errorf("anonymous %s: %d %s, want 403", path, code, body)
		}
	}

	client := kubernetes.NewForConfigOrDie(srv.AdminConfig)
	tok, err := jointoken.Create(ctx, client, srv.AdminConfig.CAData, jointoken.Options{Role: jointoken.RoleServer})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := serverjoin.Fetch(ctx, srv.URL, tok); err == nil || !strings.Contains(err.Error(), "--cluster-init") {
		t.Errorf("joining a single server: %v, want a refusal naming --cluster-init", err)
	}
}
