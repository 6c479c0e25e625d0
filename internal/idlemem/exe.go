package idlemem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The executable's own pages are the other memory an idle server holds for nothing.
// When a process first runs code or reads data of its executable, the kernel reads the
// file around the fault (read_ahead_kb, 8 MiB on this project's machines) into large
// page-cache folios and maps whole folios into the process, so start-up alone, which
// touches a little of almost every package, leaves most of the binary resident: an
// idle `mizzen server` held ~66 MiB of its executable's pages and uses 6–15 of them.
// ReleaseExecutable unmaps those pages once start-up is over; what the process runs
// later is mapped again from the page cache as it faults.

// exeMapping is one read-only mapping of the executable.
type exeMapping struct {
	start, end uintptr
}

// ReleaseExecutable unmaps the pages of the running executable's read-only mappings
// (code and read-only data) from this process; they stay in the page cache, and the
// next access to any of them maps it again. It returns the bytes of address space it
// released, resident or not.
func ReleaseExecutable() (uintptr, error) {
	mappings, err := executableMappings()
	if err != nil {
		return 0, err
	}
	var released uintptr
	for _, m := range mappings {
		// Unmapping only: the pages stay in the page cache for the next process that
		// runs the binary (kubectl, an agent, a restarted server) and for this one's
		// next fault. Evicting them as well (MADV_PAGEOUT, with MADV_RANDOM so that
		// faults read single pages) left 10 MiB less resident but made the next
		// process read ~40 MiB from disk, and this one read each page it touched
		// later with a synchronous read; the kernel evicts them anyway when memory
		// is short.
		if err := madvise(m, unix.MADV_DONTNEED); err != nil {
			return released, fmt.Errorf("madvise(%#x-%#x, MADV_DONTNEED): %w", m.start, m.end, err)
		}
		released += m.end - m.start
	}
	return released, nil
}

func madvise(m exeMapping, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// executableMappings reads /proc/self/smaps for the mappings of the executable's inode
// that nothing may write and that hold only the file's pages. A read-only mapping may
// still hold pages of this process's own: a dynamically linked (cgo) binary's RELRO
// segment (GOT, .data.rel.ro) is written by the dynamic linker and only then made
// read-only, so its pages are private copies ("Anonymous" in smaps), and dropping them
// would bring back the file's unrelocated bytes (a call through the GOT then jumps to
// 0). Such mappings are left alone. The inode and not the path identifies the file: a
// binary replaced while it runs shows as "path (deleted)".
func executableMappings() ([]exeMapping, error) {
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		return nil, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	return parseSmaps(smaps, exe.Ino, unix.Major(exe.Dev), unix.Minor(exe.Dev))
}

// parseSmaps picks, from /proc/PID/smaps text, the mappings of inode ino on device
// major:minor without write permission and without anonymous pages.
func parseSmaps(smaps []byte, ino uint64, major, minor uint32) ([]exeMapping, error) {
	var out []exeMapping
	candidate := false // the mapping being read is the executable's, read-only
	s := bufio.NewScanner(bytes.NewReader(smaps))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(f[0], ":"); ok {
			// A field of the mapping above: "Anonymous:   12 kB".
			if candidate && key == "Anonymous" && (len(f) < 2 || f[1] != "0") {
				out = out[:len(out)-1]
				candidate = false
			}
			continue
		}
		// A mapping's header: address perms offset dev inode [path].
		candidate = false
		if len(f) < 5 || f[4] != strconv.FormatUint(ino, 10) || strings.ContainsRune(f[1], 'w') {
			continue
		}
		maj, min, ok := strings.Cut(f[3], ":")
		if !ok || !hexIs(maj, major) || !hexIs(min, minor) {
			continue
		}
		start, end, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("smaps line %q: no address range", line)
		}
		a, errA := strconv.ParseUint(start, 16, 64)
		b, errB := strconv.ParseUint(end, 16, 64)
		if errA != nil || errB != nil || b <= a {
			return nil, fmt.Errorf("smaps line %q: bad address range", line)
		}
		out = append(out, exeMapping{start: uintptr(a), end: uintptr(b)})
		candidate = true
	}
	return out, s.Err()
}

func hexIs(s string, v uint32) bool {
	n, err := strconv.ParseUint(s, 16, 32)
	return err == nil && uint32(n) == v
}
