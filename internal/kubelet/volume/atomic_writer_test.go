package volume

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestUnchangedVolumeIsNotReread checks what the writer's memory of each volume's
// payload gives and keeps: an unchanged payload neither rewrites nor reads the volume's
// files (shown by a file changed behind the kubelet's back, which stays changed), a
// changed payload is swapped in atomically, and a restarted kubelet (a fresh Manager),
// remembering nothing, compares the disk again: it repairs the changed file and leaves
// an intact volume alone.
func TestUnchangedVolumeIsNotReread(t *testing.T) {
	m, src, clk := newTestManager(t)
	pod := testPod(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	setUp := func(m *Manager) string {
		t.Helper()
		vols, err := m.SetUp(context.Background(), pod)
		if err != nil {
			t.Fatal(err)
		}
		return vols["vol"].Path
	}
	dataDir := func(dir string) string {
		t.Helper()
		target, err := os.Readlink(filepath.Join(dir, dataDirName))
		if err != nil {
			t.Fatal(err)
		}
		return target
	}
	tamper := func(dir string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, dataDir(dir), "a"), []byte("tampered"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step, dir string, want map[string]string) {
		t.Helper()
		if got := visible(t, dir); fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
			t.Errorf("%s: the volume shows %v, want %v", step, sorted(got), sorted(want))
		}
	}
	original := map[string]string{"a": `-rw-r--r-- "alpha"`, "b": `-rw-r--r-- "beta"`, "bin": "-rw-r--r-- \"\\x00\\x01\\x02\""}
	tampered := map[string]string{"a": `-rw-r--r-- "tampered"`, "b": `-rw-r--r-- "beta"`, "bin": "-rw-r--r-- \"\\x00\\x01\\x02\""}

	dir := setUp(m)
	first := dataDir(dir)
	check("first set-up", dir, original)

	// Unchanged payload: the writer trusts its memory and reads nothing.
	tamper(dir)
	setUp(m)
	if got := dataDir(dir); got != first {
		t.Errorf("..data moved from %q to %q with an unchanged payload", first, got)
	}
	check("unchanged payload after a change behind the kubelet's back", dir, tampered)

	// A restart remembers nothing: the disk is compared and the file repaired.
	restarted := NewManager(Options{RootDir: m.opts.RootDir, Sources: src, Clock: clk})
	setUp(restarted)
	repaired := dataDir(dir)
	if repaired == first {
		t.Errorf("..data still %q after a restarted kubelet found a file changed", first)
	}
	check("restarted kubelet", dir, original)
	// ... and leaves an intact volume alone, with or without memory.
	setUp(NewManager(Options{RootDir: m.opts.RootDir, Sources: src, Clock: clk}))
	setUp(restarted)
	if got := dataDir(dir); got != repaired {
		t.Errorf("..data moved from %q to %q with nothing changed", repaired, got)
	}

	// A changed payload is written to a new directory and swapped in.
	src.mu.Lock()
	src.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "ALPHA", "c": "gamma"}}
	src.mu.Unlock()
	setUp(restarted)
	if got := dataDir(dir); got == repaired {
		t.Errorf("..data still %q after the payload changed", got)
	}
	check("changed payload", dir, map[string]string{"a": `-rw-r--r-- "ALPHA"`, "c": `-rw-r--r-- "gamma"`})
	if _, err := os.Stat(filepath.Join(dir, repaired)); !os.IsNotExist(err) {
		t.Errorf("old data directory %s still there: %v", repaired, err)
	}

	// ..data swapped behind the writer's back: the disk is compared again.
	other := filepath.Join(dir, "..other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"a": "tampered", "c": "gamma"} {
		if err := os.WriteFile(filepath.Join(other, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("..other", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, dataDirName)); err != nil {
		t.Fatal(err)
	}
	setUp(restarted)
	if got := dataDir(dir); got == "..other" {
		t.Error("..data left pointing to a directory swapped in behind the writer's back")
	}
	check("..data not where the writer left it", dir, map[string]string{"a": `-rw-r--r-- "ALPHA"`, "c": `-rw-r--r-- "gamma"`})

	// Tearing the pod's volumes down forgets them.
	if err := restarted.TearDownVolumes(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	restarted.writer.mu.Lock()
	n := len(restarted.writer.written)
	restarted.writer.mu.Unlock()
	if n != 0 {
		t.Errorf("the writer remembers %d volumes after the pod's volumes were torn down", n)
	}
}

func TestPayloadDigest(t *testing.T) {
	owner := int64(1000)
	base := payload{"a": {data: []byte("x"), mode: 0o644}, "d/b": {data: []byte("y"), mode: 0o600}}
	variants := map[string]payload{
		"data":    {"a": {data: []byte("X"), mode: 0o644}, "d/b": {data: []byte("y"), mode: 0o600}},
		"mode":    {"a": {data: []byte("x"), mode: 0o640}, "d/b": {data: []byte("y"), mode: 0o600}},
		"owner":   {"a": {data: []byte("x"), mode: 0o644, owner: &owner}, "d/b": {data: []byte("y"), mode: 0o600}},
		"path":    {"a": {data: []byte("x"), mode: 0o644}, "d/c": {data: []byte("y"), mode: 0o600}},
		"fewer":   {"a": {data: []byte("x"), mode: 0o644}},
		"shifted": {"a": {data: []byte("xy"), mode: 0o644}, "d/b": {data: []byte(""), mode: 0o600}},
	}
	d := base.digest(-1)
	if again := (payload{"d/b": base["d/b"], "a": base["a"]}).digest(-1); again != d {
		t.Error("equal payloads have different digests")
	}
	if base.digest(2000) == d {
		t.Error("the fsGroup does not change the digest")
	}
	for name, p := range variants {
		if p.digest(-1) == d {
			t.Errorf("payload with a different %s has the same digest", name)
		}
	}
}
