package idlemem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSmaps(t *testing.T) {
	smaps := `00400000-0301b000 r-xp 00000000 fd:01 1234 /usr/local/bin/mizzen (deleted)
Rss:               40960 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
0301b000-06759000 r--p 02c1b000 fd:01 1234 /usr/local/bin/mizzen (deleted)
Anonymous:             0 kB
06759000-0675a000 r--p 06359000 fd:01 1234 /usr/local/bin/mizzen (deleted)
Rss:                   4 kB
Anonymous:             4 kB
VmFlags: rd mr mw me ac
0675a000-06892000 rw-p 0635a000 fd:01 1234 /usr/local/bin/mizzen (deleted)
Anonymous:            12 kB
06892000-068e0000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r--p 00000000 fd:01 99 /usr/lib/other
7f0000001000-7f0000002000 r--p 00000000 fd:02 1234 /mnt/same-inode-other-device
7ffd0000-7ffd1000 r-xp 00000000 00:00 0 [vdso]
`
	got, err := parseSmaps([]byte(smaps), 1234, 0xfd, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Not the relocated read-only page at 06759000 (RELRO: its page is this process's
	// own copy) nor the writable data.
	want := []exeMapping{{0x400000, 0x301b000}, {0x301b000, 0x6759000}}
	if !slices.Equal(got, want) {
		t.Fatalf("parseSmaps = %x, want %x", got, want)
	}
	if _, err := parseSmaps([]byte("zz-yy r-xp 0 fd:01 1234 /x\n"), 1234, 0xfd, 1); err == nil {
		t.Fatal("a bad address range parsed")
	}
}

// TestReleaseExecutable runs testdata/release, static and (where a C compiler is
// found) dynamically linked with cgo: with every page of its executable mapped, the
// release must leave at most a third of them resident and nearly all of them in the
// page cache, and the program must go on running, calling C through the dynamic
// linker's relocated tables too (dropping the RELRO segment made a cgo build of
// `mizzen server` jump to address 0).
func TestReleaseExecutable(t *testing.T) {
	for _, cgo := range []bool{false, true} {
		t.Run(map[bool]string{false: "static", true: "cgo"}[cgo], func(t *testing.T) {
			if _, err := exec.LookPath("gcc"); cgo && err != nil {
				t.Skip("no C compiler for cgo")
			}
			runRelease(t, cgo)
		})
	}
}

func runRelease(t *testing.T, cgo bool) {
	bin := filepath.Join(t.TempDir(), "release")
	// With cgo, bound at load (-z now), as `go build ./cmd/mizzen` links: the PLT's
	// table is then in the RELRO segment, written by the dynamic linker.
	build := exec.Command("go", "build", "-ldflags=-extldflags=-Wl,-z,now", "-o", bin, "./testdata/release")
	build.Env = append(os.Environ(), map[bool]string{false: "CGO_ENABLED=0", true: "CGO_ENABLED=1"}[cgo])
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Written back, as an installed binary is: dirty page cache would not be evicted
	// by a release that tried to.
	if f, err := os.Open(bin); err != nil {
		t.Fatal(err)
	} else if err := errors.Join(f.Sync(), f.Close()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	next := func(want string) string {
		t.Helper()
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), want) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("wanted %q from the program, got %q (%v); stderr:\n%s", want, lines.Text(), cmd.ProcessState, stderr.String())
		}
		return lines.Text()
	}
	next("populated")
	before := exeResidentKiB(t, cmd.Process.Pid)
	_, _ = io.WriteString(stdin, "\n")
	next("released")
	after := exeResidentKiB(t, cmd.Process.Pid)
	_, _ = io.WriteString(stdin, "\n")
	var cached, pages int
	if _, err := fmt.Sscanf(next("cached"), "cached %d %d", &cached, &pages); err != nil {
		t.Fatal(err)
	}
	next("ok")
	t.Logf("resident: %d KiB before the release, %d KiB after; %d of %d pages in the page cache", before, after, cached, pages)
	// What the program runs after the release (printing, reading stdin; with cgo,
	// more of the runtime) comes back in whole large folios: 1–6 MiB here.
	if after > before/3 {
		t.Errorf("%d KiB of the executable still resident after the release, of %d", after, before)
	}
	if cached < pages*3/4 {
		t.Errorf("only %d of the executable's %d pages left in the page cache: the release evicted them", cached, pages)
	}
}

// exeResidentKiB sums the resident pages of process pid's read-only mappings of its
// executable, from /proc/PID/smaps.
func exeResidentKiB(t *testing.T, pid int) uint64 {
	t.Helper()
	var exe unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", pid), &exe); err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var kib uint64
	in := false
	for line := range strings.Lines(string(smaps)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && !strings.HasSuffix(f[0], ":"):
			in = f[4] == strconv.FormatUint(exe.Ino, 10) && !strings.Contains(f[1], "w")
		case in && len(f) >= 2 && f[0] == "Rss:":
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			kib += n
		}
	}
	return kib
}
