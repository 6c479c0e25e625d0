package podcgroups

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestParseMountinfo(t *testing.T) {
	const mountinfo = `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 - cgroup cgroup rw,cpu,cpuacct
32 30 0:28 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
33 30 0:29 / /sys/fs/cgroup/odd\040name rw - cgroup cgroup rw,name=odd
40 22 0:40 / /run/cgroup-lookalike rw - tmpfs cgroup rw
`
	got, err := parseMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/odd name"}
	if !slices.Equal(got, want) {
		t.Errorf("cgroup mounts = %q, want %q", got, want)
	}
}

func TestRemovePodAndList(t *testing.T) {
	// Two "hierarchies" as plain directories: rmdir behaves the same on an empty one.
	cpu, memory := t.TempDir(), t.TempDir()
	mkdir := func(path string) {
		t.Helper()
		if err := os.MkdirAll(path, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []string{cpu, memory} {
		mkdir(filepath.Join(h, "kubepods/besteffort/poda"))
		mkdir(filepath.Join(h, "kubepods/burstable/podb"))
	}
	mkdir(filepath.Join(cpu, "kubepods/podc"))
	// A pod whose container cgroup is still there is not removed.
	mkdir(filepath.Join(memory, "kubepods/burstable/podb/0123abcd"))
	// Not a pod cgroup.
	mkdir(filepath.Join(cpu, "kubepods/besteffort/other"))

	c := New(cpu, memory)
	pods, err := c.Pods()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pods)
	if want := []types.UID{"a", "b", "c"}; !slices.Equal(pods, want) {
		t.Fatalf("pods = %q, want %q", pods, want)
	}

	if err := c.RemovePod("a"); err != nil {
		t.Errorf("RemovePod(a): %v", err)
	}
	if err := c.RemovePod("c"); err != nil {
		t.Errorf("RemovePod(c): %v", err)
	}
	if err := c.RemovePod("gone"); err != nil {
		t.Errorf("RemovePod of a pod without cgroups: %v", err)
	}
	if err := c.RemovePod("b"); err == nil {
		t.Error("RemovePod(b) with a container cgroup left: no error")
	}
	pods, err = c.Pods()
	if err != nil {
		t.Fatal(err)
	}
	if want := []types.UID{"b"}; !slices.Equal(pods, want) {
		t.Errorf("pods after removal = %q, want %q", pods, want)
	}
	// The empty pod cgroup in the other hierarchy went; the busy one stayed.
	if _, err := os.Stat(filepath.Join(cpu, "kubepods/burstable/podb")); !os.IsNotExist(err) {
		t.Errorf("cpu podb still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(memory, "kubepods/burstable/podb/0123abcd")); err != nil {
		t.Errorf("memory podb's container cgroup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cpu, "kubepods/besteffort/other")); err != nil {
		t.Errorf("a cgroup not named pod<UID> was touched: %v", err)
	}
}

func TestPodProcesses(t *testing.T) {
	cpu, pids := t.TempDir(), t.TempDir()
	dir := filepath.Join(pids, "kubepods/burstable/poda")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.current"), []byte("17\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := New(cpu, pids)
	tests := []struct {
		uid    types.UID
		want   int64
		wantOK bool
	}{{uid: "a", want: 17, wantOK: true}, {uid: "gone"}}
	for _, tt := range tests {
		got, ok := c.PodProcesses(tt.uid)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("PodProcesses(%s) = %d, %v; want %d, %v", tt.uid, got, ok, tt.want, tt.wantOK)
		}
	}
}
