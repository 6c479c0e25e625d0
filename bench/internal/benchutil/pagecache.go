package benchutil

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DropCachedPages writes back and drops from the page cache every page of each file
// that no process has mapped, so that a server started from it next has its binary's
// pages read in by its own faults.
//
// Why a benchmark comparing servers' memory needs this: part of a process's RSS is its
// binary's pages, and how many of those it maps depends on how the file got into the
// page cache, not only on what the process runs. A binary the Go linker has just
// written sits in the page cache in large folios, and the kernel (6.18 here) maps a
// whole folio into a process that touches any page of it; the same binary read in by
// exec's faults is mapped in much smaller pieces. The same mizzen binary, holding
// 10,000 pods, had 96.5 MiB of file-backed RSS straight after `go build` and 69.6 MiB after
// its pages were dropped (BENCHMARKS.md, mem19). Dropping every compared binary's
// pages before it starts puts them all in the same state.
func DropCachedPages(paths ...string) error {
	for _, p := range paths {
		if err := dropCachedPages(p); err != nil {
			return err
		}
	}
	return nil
}

func dropCachedPages(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	// Dirty pages are not dropped: write them back first (a binary just built may
	// not have reached the disk yet).
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return fmt.Errorf("writing back %s: %w", path, err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("dropping the cached pages of %s: %w", path, err)
	}
	return nil
}
