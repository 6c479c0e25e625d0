package volume

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MakeRShared makes dir a recursively shared mount, as upstream's kubelet does with its
// root directory: a container mounting part of it with Bidirectional propagation (a
// CSI node plugin publishing volumes under pods/) needs the mount it sits on to be
// shared, or the runtime refuses it, and its mounts would not reach the host.
// A dir already on a shared mount is left alone; otherwise it is bind-mounted onto
// itself first so that only dir, not its parent filesystem, changes propagation.
func MakeRShared(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	point, shared, err := mountOf(f, dir)
	f.Close()
	if err != nil {
		return err
	}
	if shared {
		return nil
	}
	if point != dir {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s onto itself: %w", dir, err)
		}
	}
	if err := syscall.Mount("", dir, "", syscall.MS_SHARED|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("making %s a shared mount: %w", dir, err)
	}
	return nil
}

// mountOf finds, in a mountinfo file, the mount point dir lives on (the longest one
// that is dir or a parent of it, the last mounted when stacked) and whether it is shared.
func mountOf(r io.Reader, dir string) (point string, shared bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional fields...] - fstype source super
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp != dir && mp != "/" && !strings.HasPrefix(dir, mp+"/") {
			continue
		}
		if len(mp) < len(point) {
			continue
		}
		point, shared = mp, false
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	return point, shared, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}
