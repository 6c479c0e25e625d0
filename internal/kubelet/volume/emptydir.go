package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

// setUpEmptyDir creates the volume's directory, world-writable as upstream makes it;
// medium Memory is a tmpfs mount limited to sizeLimit when one is set. With an fsGroup
// the volume is given to the group the first time this manager sets it up (see
// ownVolume).
func (m *Manager) setUpEmptyDir(pod *v1.Pod, name, dir string, src *v1.EmptyDirVolumeSource) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		if !m.opts.Tmpfs {
			break
		}
		var opts string
		if src.SizeLimit != nil && !src.SizeLimit.IsZero() {
			opts = fmt.Sprintf("size=%d", src.SizeLimit.Value())
		}
		if err := mountTmpfs(dir, opts); err != nil {
			return err
		}
	default:
		return fmt.Errorf("emptyDir medium %q is not supported", src.Medium)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if info.Mode().Perm() != 0o777 {
		// Keep the setgid bit an fsGroup gave the directory.
		if err := os.Chmod(dir, info.Mode()&(os.ModeSetgid|os.ModeSticky)|0o777); err != nil {
			return err
		}
	}
	return m.ownVolume(pod, name, dir)
}

// mountTmpfs mounts a tmpfs on dir unless one is already there.
func mountTmpfs(dir, opts string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("mounting tmpfs on %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether dir is on another filesystem than its parent.
func isMountPoint(dir string) (bool, error) {
	var st, parent syscall.Stat_t
	if err := syscall.Lstat(dir, &st); err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	if err := syscall.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}
