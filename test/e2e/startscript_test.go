package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hack/start-server.sh (what `make run` starts the server with) must report a server
// that passes /readyz and then exits, with the log's last lines, and fail; and succeed
// for one that stays up. The server here is a stand-in script whose kubectl answers
// /readyz and lists a Ready node, so only the script's own logic is under test.
func TestStartScriptNoticesALateDeath(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "hack", "start-server.sh")
	for _, tc := range []struct {
		name, server string
		wantOK       bool
	}{
		{"dies after readyz", `touch "$DATA/admin.kubeconfig"; sleep 1; echo "error: metrics-server: tls: bad certificate"; exit 1`, false},
		{"dies at once", `echo "error: bad flag"; exit 1`, false},
		{"stays up", `touch "$DATA/admin.kubeconfig"; exec sleep 30`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			if err := os.MkdirAll(data, 0o755); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "mizzen")
			stub := "#!/bin/bash\nDATA=" + data + "\n" +
				"if [ \"$1\" = server ]; then " + tc.server + "; fi\n" +
				"if [ \"$1\" = kubectl ]; then case \"$*\" in *readyz*) [ -f \"$DATA/admin.kubeconfig\" ];; *nodes*) echo 'vm Ready <none> 1m v1.37.2';; esac; exit $?; fi\n"
			if err := os.WriteFile(bin, []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(dir, "server.pid")
			out, err := exec.Command(script, bin, data, filepath.Join(dir, "server.log"), pidFile).CombinedOutput()
			t.Cleanup(func() {
				if pid, err := os.ReadFile(pidFile); err == nil {
					_ = exec.Command("kill", strings.TrimSpace(string(pid))).Run()
				}
			})
			if ok := err == nil; ok != tc.wantOK {
				t.Fatalf("script succeeded = %v, want %v; output:\n%s", ok, tc.wantOK, out)
			}
			if !tc.wantOK && !strings.Contains(string(out), "error:") {
				t.Fatalf("the report should carry the log's last lines; output:\n%s", out)
			}
		})
	}
}
