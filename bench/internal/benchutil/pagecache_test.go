package benchutil

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the pages of path that are in the page cache.
func residentPages(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(data)
	vec := make([]byte, (len(data)+os.Getpagesize()-1)/os.Getpagesize())
	// x/sys/unix has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestDropCachedPagesLeavesNoneCached(t *testing.T) {
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skip("a tmpfs file lives in the page cache: nothing to drop")
	}
	path := filepath.Join(dir, "binary")
	if err := os.WriteFile(path, make([]byte, 4<<20), 0o755); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, path); n == 0 {
		t.Fatal("a file just written has no page cached; the test cannot tell anything")
	}
	if err := DropCachedPages(path); err != nil {
		t.Fatal(err)
	}
	if n := residentPages(t, path); n != 0 {
		t.Errorf("%d pages still cached after DropCachedPages", n)
	}
	if err := DropCachedPages(filepath.Join(dir, "missing")); err == nil {
		t.Error("DropCachedPages of a missing file: no error")
	}
}
