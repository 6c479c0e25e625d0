package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"mizzen/internal/testing/proc"
)

// TestDashboardCommand runs `mizzen dashboard` on its own, given the admin kubeconfig,
// and checks over HTTPS that the admin's credentials never serve a user: without a
// session nothing reaches the apiserver, and a logged-in ServiceAccount with no role
// gets the apiserver's own refusal where the admin would have been allowed.
func TestDashboardCommand(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	dataDir := t.TempDir()
	c := startServer(t, dataDir, freePort(t), "--disable", "agent,dashboard", "--cluster-cidr", dashClusterCIDR,
		"--pod-bridge", dashBridge, "--service-cluster-ip-range", dashServiceCIDR)
	c.kubectl("create", "serviceaccount", "nobody")
	token := strings.TrimSpace(c.kubectl("create", "token", "nobody"))

	port := freePort(t)
	var log bytes.Buffer
	cmd := exec.Command(mizzenBin, "dashboard", "--kubeconfig", c.kubeconfig, "--listen", "127.0.0.1:"+strconv.Itoa(port), "--cert-dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(cmd, 10*time.Second)
		if t.Failed() {
			t.Logf("dashboard log:\n%s", log.String())
		}
	})
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{
		// The dashboard's self-signed certificate (--cert-dir).
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (int, string) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually(t, 30*time.Second, func() error {
		if code, body := get("/login"); code != http.StatusOK {
			return fmt.Errorf("GET /login: %d %s", code, body)
		}
		return nil
	})
	if code, body := get("/k8s/api/v1/namespaces"); code != http.StatusUnauthorized || !strings.Contains(body, `"reason":"Unauthorized"`) {
		t.Errorf("listing namespaces without a session: %d %s", code, body)
	}
	login := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := login("not-a-token"); code != http.StatusUnauthorized || !strings.Contains(body, "refused the token") {
		t.Errorf("logging in with a made-up token: %d %s", code, body)
	}
	if code, body := login(token); code != http.StatusOK || !strings.Contains(body, `src="static/app.js"`) {
		t.Fatalf("logging in with the ServiceAccount's token: %d %s", code, body)
	}
	// Logged in as a ServiceAccount no role binds: the apiserver decides, as that user.
	code, body := get("/k8s/api/v1/namespaces")
	if code != http.StatusForbidden || !strings.Contains(body, `User \"system:serviceaccount:default:nobody\" cannot list resource \"namespaces\"`) {
		t.Errorf("listing namespaces as nobody: %d %s", code, body)
	}
	if code, body := get("/k8s/version"); code != http.StatusOK || !strings.Contains(body, "gitVersion") {
		t.Errorf("GET /version as nobody: %d %s", code, body)
	}
}
