// Package podcgroups removes the cgroups of pods that are gone. The kubelet names a
// cgroup per pod as the sandbox's cgroup parent (/kubepods[/besteffort|/burstable]/pod<UID>,
// the cgroupfs layout) and runc creates it, in every hierarchy, on the pod's first
// container; runc removes only the containers' own cgroups, so the pod's stay behind
// unless the kubelet removes them. Left alone they pile up by the thousand on a busy
// node, and every cpuset change walks all of them.
package podcgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// QoSParents are the cgroups under which pod cgroups live, one per QoS class
// (Guaranteed, BestEffort, Burstable).
var QoSParents = []string{"/kubepods", "/kubepods/besteffort", "/kubepods/burstable"}

// Cgroups is the host's cgroup hierarchies: the mount point of each cgroup (v1) or
// cgroup2 filesystem.
type Cgroups struct {
	mounts []string
}

// FromMountinfo reads the cgroup mount points from a /proc/<pid>/mountinfo file.
func FromMountinfo(path string) (*Cgroups, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mounts, err := parseMountinfo(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Cgroups{mounts: mounts}, nil
}

// New is a Cgroups with the given hierarchy mount points, for tests.
func New(mounts ...string) *Cgroups { return &Cgroups{mounts: mounts} }

// parseMountinfo returns the mount points of cgroup and cgroup2 filesystems. A
// mountinfo line is "id parent major:minor root mountpoint options [optional...] -
// fstype source superoptions".
func parseMountinfo(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f != "-" || i < 5 || i+1 >= len(fields) {
				continue
			}
			if fs := fields[i+1]; fs == "cgroup" || fs == "cgroup2" {
				out = append(out, UnescapeMountinfo(fields[4]))
			}
			break
		}
	}
	return out, sc.Err()
}

// UnescapeMountinfo undoes the octal escapes (\040 for a space, ...) of a mountinfo path.
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// RemovePod removes the pod's cgroup from every hierarchy and QoS class. A cgroup that
// does not exist is not an error; one that still holds processes or containers is
// (EBUSY), and is left for a later attempt.
func (c *Cgroups) RemovePod(uid types.UID) error {
	var errs []error
	for _, parent := range QoSParents {
		for _, mount := range c.mounts {
			dir := filepath.Join(mount, parent, "pod"+string(uid))
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dir, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Pods lists the UIDs of the pod cgroups present in any hierarchy.
func (c *Cgroups) Pods() ([]types.UID, error) {
	seen := map[types.UID]bool{}
	var out []types.UID
	for _, mount := range c.mounts {
		for _, parent := range QoSParents {
			entries, err := os.ReadDir(filepath.Join(mount, parent))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				uid, ok := strings.CutPrefix(e.Name(), "pod")
				if !ok || !e.IsDir() || uid == "" || seen[types.UID(uid)] {
					continue
				}
				seen[types.UID(uid)] = true
				out = append(out, types.UID(uid))
			}
		}
	}
	return out, nil
}

// PodProcesses counts the pod's processes (threads included) from its cgroup's
// pids.current, in whichever hierarchy has the pids controller; ok is false when no
// hierarchy reports it.
func (c *Cgroups) PodProcesses(uid types.UID) (int64, bool) {
	for _, mount := range c.mounts {
		for _, parent := range QoSParents {
			b, err := os.ReadFile(filepath.Join(mount, parent, "pod"+string(uid), "pids.current"))
			if err != nil {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// PodDirs are the pod's cgroup directories that exist, in every hierarchy and QoS class.
func (c *Cgroups) PodDirs(uid string) []string {
	var dirs []string
	for _, mount := range c.mounts {
		for _, parent := range QoSParents {
			dir := filepath.Join(mount, parent, "pod"+uid)
			if info, err := os.Stat(dir); err == nil && info.IsDir() {
				dirs = append(dirs, dir)
			}
		}
	}
	return dirs
}
