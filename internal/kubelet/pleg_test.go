package kubelet

import (
	"fmt"
	"hash/fnv"
	"testing"
)

func TestFingerprint(t *testing.T) {
	for _, tt := range []struct {
		id    string
		state int32
	}{{"", 0}, {"abc", 1}, {"0123456789abcdef0123456789abcdef", 3}, {"x", -1}, {"y", 2147483647}} {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", tt.id, tt.state)
		if got, want := fingerprint(tt.id, tt.state), h.Sum64(); got != want {
			t.Errorf("fingerprint(%q, %d) = %x, want FNV-1a of %q: %x", tt.id, tt.state, got, fmt.Sprintf("%s/%d", tt.id, tt.state), want)
		}
	}
	if testing.AllocsPerRun(100, func() { fingerprint("0123456789abcdef", 1) }) != 0 {
		t.Error("fingerprint allocates")
	}
}
