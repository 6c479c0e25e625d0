package kubelet

import (
	"os"
	"path/filepath"
	"testing"
)

// The fallback termination message is the output as the container wrote it: a partial
// record (no trailing newline, as after `echo -n`) gets none added.
func TestLogTailKeepsPartialLines(t *testing.T) {
	for name, tt := range map[string]struct{ log, want string }{
		"partial":        {"2026-01-01T00:00:00Z stdout P DONE\n", "DONE"},
		"full lines":     {"2026-01-01T00:00:00Z stdout F one\n2026-01-01T00:00:01Z stderr F two\n", "one\ntwo\n"},
		"split one line": {"2026-01-01T00:00:00Z stdout P ab\n2026-01-01T00:00:00Z stdout F cd\n", "abcd\n"},
	} {
		path := filepath.Join(t.TempDir(), "0.log")
		if err := os.WriteFile(path, []byte(tt.log), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := logTail(path); got != tt.want {
			t.Errorf("%s: logTail = %q, want %q", name, got, tt.want)
		}
	}
}
