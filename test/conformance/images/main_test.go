package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithoutAppletKeepsTheTableSorted(t *testing.T) {
	applets := []string{"mv", "nameif", "nc", "netstat", "nl"}
	binary := []byte("code\x00mv\x00nameif\x00nc\x00netstat\x00nl\x00more code nc")
	got, err := withoutApplet(binary, applets, "nc")
	if err != nil {
		t.Fatal(err)
	}
	if want := "code\x00mv\x00nameif\x00nd\x00netstat\x00nl\x00more code nc"; string(got) != want {
		t.Errorf("withoutApplet = %q, want %q", got, want)
	}
	if _, err := withoutApplet(binary, applets, "mv"); err == nil {
		t.Error("the first applet was renamed; its predecessor is unknown, so the order cannot be checked")
	}
	if _, err := withoutApplet([]byte("\x00nameif\x00nc\x00netstat\x00 \x00nameif\x00nc\x00netstat\x00"), applets, "nc"); err == nil {
		t.Error("an ambiguous table was patched")
	}
	if _, err := withoutApplet(binary, []string{"na", "nc", "nd"}, "nc"); err == nil {
		t.Error("renamed to a name that is no longer between its neighbours")
	}
}

// With the real busybox the harness uses: its sh runs its own applets before searching
// PATH, so only a busybox without the nc applet lets `sh -c nc` reach the stand-in.
func TestBusyboxShFindsTheStandInNC(t *testing.T) {
	const busybox = "/bin/busybox"
	if _, err := os.Stat(busybox); err != nil {
		t.Skip("no busybox-static here")
	}
	dir := t.TempDir()
	files, err := busyboxFiles(busybox, []string{"nc"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path == "/bin/nc" {
			t.Fatal("the image still links /bin/nc to busybox")
		}
		if f.Path == "/bin/busybox" {
			if err := os.WriteFile(filepath.Join(dir, "busybox"), f.Data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink("busybox", filepath.Join(dir, "sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nc"), []byte("#!"+filepath.Join(dir, "sh")+"\necho stand-in \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "sh"), "-c", "nc -v -t; netstat --help 2>&1 | head -1")
	cmd.Env = []string{"PATH=" + dir}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sh: %v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] != "stand-in -v -t" || !strings.HasPrefix(lines[1], "BusyBox") {
		t.Errorf("sh -c 'nc -v -t; netstat --help' printed %q; want the stand-in's line, then busybox's netstat", out)
	}
}
