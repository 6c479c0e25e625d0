package idlemem

import (
	"bufio"
	"bytes"
	"errors"
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

// TestReleaseDynamicallyLinked runs a cgo program that releases its pages and then
// calls C through its relocated tables: dropping its RELRO segment crashed it (a jump
// to address 0), as it crashed a `mizzen server` built with cgo.
func TestReleaseDynamicallyLinked(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no C compiler for cgo")
	}
	bin := filepath.Join(t.TempDir(), "cgorelease")
	// Bound at load (-z now), as `go build ./cmd/mizzen` links with cgo: the PLT's
	// table is then in the RELRO segment, filled in by the dynamic linker.
	build := exec.Command("go", "build", "-ldflags=-extldflags=-Wl,-z,now", "-o", bin, "./testdata/cgorelease")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command("file", bin).Output(); err == nil && !bytes.Contains(out, []byte("dynamically linked")) {
		t.Fatalf("the cgo program is not dynamically linked: %s", out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("the cgo program after the release: %v\n%s", err, out)
	}
}

// TestReleaseExecutable maps every page of the test binary's read-only mappings, as
// start-up's large folios do, and checks that the release leaves few of them
// resident, marks the mappings random, and that the code still runs.
func TestReleaseExecutable(t *testing.T) {
	mappings, err := executableMappings()
	if err != nil {
		t.Fatal(err)
	}
	if len(mappings) == 0 {
		t.Fatal("no read-only mapping of the executable in /proc/self/maps")
	}
	var size uintptr
	for _, m := range mappings {
		if err := madvise(m, unix.MADV_POPULATE_READ); err != nil {
			if errors.Is(err, unix.EINVAL) {
				t.Skip("MADV_POPULATE_READ needs Linux 5.14")
			}
			t.Fatal(err)
		}
		size += m.end - m.start
	}
	before := residentKiB(t, mappings)
	if before*1024 < uint64(size)*9/10 {
		t.Fatalf("%d KiB resident of %d KiB after populating", before, size/1024)
	}
	released, err := ReleaseExecutable()
	if err != nil {
		t.Fatal(err)
	}
	if released != size {
		t.Errorf("released %d bytes, want the mappings' %d", released, size)
	}
	after := residentKiB(t, mappings)
	t.Logf("resident: %d KiB before, %d KiB after", before, after)
	if after > before/4 {
		t.Errorf("%d KiB of the executable still resident after the release, of %d", after, before)
	}
	for _, m := range mappings {
		if !hasFlag(t, m, "rr") {
			t.Errorf("mapping %#x-%#x not marked random (VmFlags rr)", m.start, m.end)
		}
	}
}

// smapsEntries calls f with the fields of each /proc/self/smaps entry among mappings.
func smapsEntries(t *testing.T, mappings []exeMapping, f func(line string)) {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	s := bufio.NewScanner(bytes.NewReader(smaps))
	for s.Scan() {
		line := s.Text()
		if fields := strings.Fields(line); len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			start, end, _ := strings.Cut(fields[0], "-")
			a, _ := strconv.ParseUint(start, 16, 64)
			b, _ := strconv.ParseUint(end, 16, 64)
			in = slices.Contains(mappings, exeMapping{uintptr(a), uintptr(b)})
			continue
		}
		if in {
			f(line)
		}
	}
}

func residentKiB(t *testing.T, mappings []exeMapping) uint64 {
	var kib uint64
	smapsEntries(t, mappings, func(line string) {
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("smaps line %q: %v", line, err)
			}
			kib += n
		}
	})
	return kib
}

func hasFlag(t *testing.T, m exeMapping, flag string) bool {
	found := false
	smapsEntries(t, []exeMapping{m}, func(line string) {
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			found = found || slices.Contains(strings.Fields(v), flag)
		}
	})
	return found
}
