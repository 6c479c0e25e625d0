package containerd

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMasquerade installs the pod network's masquerade rule twice (idempotent), reads
// it back with nft, and removes it.
func TestMasquerade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for nftables")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed (apt-get install nftables)")
	}
	const bridge = "mzn-masqtest"
	t.Cleanup(func() { _ = RemoveMasquerade(bridge) })
	for _, cidr := range []string{"10.244.9.0/24", "10.244.8.0/24"} {
		if err := EnsureMasquerade(bridge, cidr, ""); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("nft", "list", "table", "ip", "mizzen-"+bridge).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list: %v\n%s", err, out)
	}
	rules := string(out)
	want := "ip saddr 10.244.8.0/24 ip daddr != 10.244.8.0/24 ip daddr != 224.0.0.0/4 masquerade"
	if !strings.Contains(rules, want) || strings.Contains(rules, "10.244.9.0") || !strings.Contains(rules, "hook postrouting") {
		t.Errorf("table holds\n%s\nwant only the rule %q", rules, want)
	}
	if err := EnsureMasquerade(bridge, "not-a-cidr", ""); err == nil {
		t.Error("accepted a bad CIDR")
	}
	// With the cluster CIDR, pod-to-pod traffic across nodes keeps its source.
	if err := EnsureMasquerade(bridge, "10.244.8.0/24", "10.244.0.0/16"); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("nft", "list", "table", "ip", "mizzen-"+bridge).CombinedOutput()
	if want := "ip saddr 10.244.8.0/24 ip daddr != 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade"; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("table holds\n%s\nwant the rule %q (%v)", out, want, err)
	}
	if err := EnsureMasquerade(bridge, "10.244.8.0/24", "fd00::/64"); err == nil {
		t.Error("accepted a cluster CIDR of another family")
	}
	if err := RemoveMasquerade(bridge); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nft", "list", "table", "ip", "mizzen-"+bridge).CombinedOutput(); err == nil {
		t.Errorf("table still there after RemoveMasquerade:\n%s", out)
	}
}
