package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestKubectlVersion: `kubectl version` works against the server, and both sides carry
// the build's stamp (the checkout's commit), as a release build's would.
func TestKubectlVersion(t *testing.T) {
	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent")
	out := c.kubectl("version")
	for _, want := range []string{"Client Version: v1.37.2+mizzen", "Server Version: v1.37.2+mizzen"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl version lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Warning") {
		t.Errorf("kubectl version warns:\n%s", out)
	}
	var v struct {
		Client, Server struct {
			Major, Minor, GitVersion, GitCommit, BuildDate string
		}
	}
	raw := c.kubectl("version", "-o", "json")
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	_ = json.Unmarshal(doc["clientVersion"], &v.Client)
	_ = json.Unmarshal(doc["serverVersion"], &v.Server)
	head, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	for side, info := range map[string]struct{ Major, Minor, GitVersion, GitCommit, BuildDate string }{"client": v.Client, "server": v.Server} {
		if info.Major != "1" || info.Minor != "37" || info.GitCommit != strings.TrimSpace(string(head)) || strings.HasPrefix(info.BuildDate, "1970") {
			t.Errorf("%s version %+v, want 1.37 at commit %s with a build date", side, info, head)
		}
	}
}

// TestHealthAndChunking: /livez and /readyz answer per check and verbosely, as upstream;
// a chunked list says how many items remain.
func TestHealthAndChunking(t *testing.T) {
	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent")
	if out := c.kubectl("get", "--raw", "/livez"); out != "ok" {
		t.Errorf("/livez = %q", out)
	}
	verbose := c.kubectl("get", "--raw", "/readyz?verbose")
	for _, want := range []string{"[+]ping ok\n", "[+]etcd ok\n", "[+]informer-sync ok\n", "readyz check passed\n"} {
		if !strings.Contains(verbose, want) {
			t.Errorf("/readyz?verbose lacks %q:\n%s", want, verbose)
		}
	}
	if out := c.kubectl("get", "--raw", "/livez?verbose&exclude=etcd"); !strings.Contains(out, "[+]etcd excluded: ok") {
		t.Errorf("/livez?exclude=etcd:\n%s", out)
	}
	if out := c.kubectl("get", "--raw", "/livez/etcd"); out != "ok" {
		t.Errorf("/livez/etcd = %q", out)
	}
	if out, err := c.kubectlErr("get", "--raw", "/readyz/no-such-check"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("/readyz/no-such-check: %v %s", err, out)
	}

	for i := 0; i < 5; i++ {
		c.kubectl("create", "configmap", "chunk-"+string(rune('a'+i)))
	}
	// An update without a resourceVersion applies to what is stored, as upstream's.
	if out := c.kubectlStdin("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: chunk-a, namespace: default}\ndata: {k: v}\n", "replace", "-f", "-"); !strings.Contains(out, "configmap/chunk-a replaced") {
		t.Errorf("replace without resourceVersion: %s", out)
	}
	var page struct {
		Metadata struct {
			Continue           string `json:"continue"`
			RemainingItemCount *int64 `json:"remainingItemCount"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	raw := c.kubectl("get", "--raw", "/api/v1/namespaces/default/configmaps?limit=2")
	if err := json.Unmarshal([]byte(raw), &page); err != nil {
		t.Fatal(err)
	}
	// 5 created plus kube-root-ca.crt, if the publisher made it already: 4 or 3 remain.
	if len(page.Items) != 2 || page.Metadata.Continue == "" || page.Metadata.RemainingItemCount == nil || *page.Metadata.RemainingItemCount < 3 {
		t.Errorf("first page: %d items, continue %q, remainingItemCount %v", len(page.Items), page.Metadata.Continue, page.Metadata.RemainingItemCount)
	}
}

// TestEphemeralContainersSubresource: kubectl debug adds an ephemeral container through
// pods/ephemeralcontainers; a regular update may not, and an added one may not change.
func TestEphemeralContainersSubresource(t *testing.T) {
	c := startServer(t, t.TempDir(), freePort(t), "--disable", "agent")
	c.kubectl("run", "web", "--image", "mizzen.local/agnhost:v1", "--restart=Never")
	out := c.kubectl("debug", "web", "--image", "mizzen.local/busybox:v1", "-c", "dbg", "--target", "web", "--", "sleep", "3600")
	if strings.Contains(out, "disabled") {
		t.Fatalf("kubectl debug: %s", out)
	}
	got := c.kubectl("get", "pod", "web", "-o", "jsonpath={.spec.ephemeralContainers[0].name} {.spec.ephemeralContainers[0].targetContainerName} {.spec.ephemeralContainers[0].terminationMessagePolicy}")
	if got != "dbg web File" {
		t.Errorf("ephemeral container after kubectl debug: %q", got)
	}
	// Changing an existing ephemeral container is refused with upstream's message.
	out, err := c.kubectlErr("patch", "pod", "web", "--subresource", "ephemeralcontainers", "--type", "json",
		"-p", `[{"op":"replace","path":"/spec/ephemeralContainers/0/image","value":"other:v1"}]`)
	if err == nil || !strings.Contains(out, `existing ephemeral containers "dbg" may not be changed`) {
		t.Errorf("changing an ephemeral container: %v %s", err, out)
	}
	// Ports are not allowed on an ephemeral container.
	out, err = c.kubectlErr("patch", "pod", "web", "--subresource", "ephemeralcontainers", "--type", "json",
		"-p", `[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"dbg2","image":"x:v1","ports":[{"containerPort":80}]}}]`)
	if err == nil || !strings.Contains(out, "cannot be set for an Ephemeral Container") {
		t.Errorf("ephemeral container with ports: %v %s", err, out)
	}
}
