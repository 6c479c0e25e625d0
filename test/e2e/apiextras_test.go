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
