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
// ReleaseExecutable gives those pages back once start-up is over, and marks the
// mappings random so a later fault maps only what it touches.

// exeMapping is one read-only mapping of the executable.
type exeMapping struct {
	start, end uintptr
}

// ReleaseExecutable drops the running executable's read-only mappings (code and
// read-only data) from this process and, where no other process maps them, from the
// page cache; the next access to any page faults it back in, without reading ahead.
// It returns the bytes of address space it released, resident or not.
func ReleaseExecutable() (uintptr, error) {
	mappings, err := executableMappings()
	if err != nil {
		return 0, err
	}
	var released uintptr
	for _, m := range mappings {
		// MADV_RANDOM first, so that a fault after the release reads one page and not
		// the folio around it. MADV_PAGEOUT evicts the pages only this process maps
		// (and only if it may write the file, as root may); MADV_DONTNEED then unmaps
		// the rest, which stay in the page cache for the processes sharing them.
		for _, advice := range []int{unix.MADV_RANDOM, unix.MADV_PAGEOUT, unix.MADV_DONTNEED} {
			if err := madvise(m, advice); err != nil && !(advice == unix.MADV_PAGEOUT && err == unix.EINVAL) {
				// EINVAL for MADV_PAGEOUT: a kernel before 5.4; unmapping still works.
				return released, fmt.Errorf("madvise(%#x-%#x, %d): %w", m.start, m.end, advice, err)
			}
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

// executableMappings reads /proc/self/maps for the mappings of the executable's inode
// that nothing may write: those hold no changes of this process, so dropping them
// loses nothing. The inode and not the path identifies the file: a binary replaced
// while it runs shows as "path (deleted)".
func executableMappings() ([]exeMapping, error) {
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		return nil, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	return parseMaps(maps, exe.Ino, unix.Major(exe.Dev), unix.Minor(exe.Dev))
}

// parseMaps picks, from /proc/PID/maps text, the mappings of inode ino on device
// major:minor without write permission.
func parseMaps(maps []byte, ino uint64, major, minor uint32) ([]exeMapping, error) {
	var out []exeMapping
	s := bufio.NewScanner(bytes.NewReader(maps))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		// address perms offset dev inode [path]
		f := strings.Fields(s.Text())
		if len(f) < 5 {
			continue
		}
		if f[4] != strconv.FormatUint(ino, 10) || strings.ContainsRune(f[1], 'w') {
			continue
		}
		maj, min, ok := strings.Cut(f[3], ":")
		if !ok || !hexIs(maj, major) || !hexIs(min, minor) {
			continue
		}
		start, end, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps line %q: no address range", s.Text())
		}
		a, errA := strconv.ParseUint(start, 16, 64)
		b, errB := strconv.ParseUint(end, 16, 64)
		if errA != nil || errB != nil || b <= a {
			return nil, fmt.Errorf("maps line %q: bad address range", s.Text())
		}
		out = append(out, exeMapping{start: uintptr(a), end: uintptr(b)})
	}
	return out, s.Err()
}

func hexIs(s string, v uint32) bool {
	n, err := strconv.ParseUint(s, 16, 32)
	return err == nil && uint32(n) == v
}
