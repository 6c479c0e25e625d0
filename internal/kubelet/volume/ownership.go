package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Permission bits an fsGroup adds, as upstream's kubelet adds them: read-write (or
// read-only, for API-data volumes) for the group on every file, plus search and the
// setgid bit on directories so that new files inherit the group.
const (
	groupReadWrite = os.FileMode(0o660)
	groupReadOnly  = os.FileMode(0o440)
	groupSearch    = os.FileMode(0o110)
)

// setVolumeOwnership gives the tree at root to group gid: every entry is chowned to
// the group and gets the group permission bits; directories also get the setgid bit.
// With policy OnRootMismatch the walk is skipped when the root already has the group,
// the bits and setgid. Symlinks are chowned but not chmodded (chmod would follow them).
func setVolumeOwnership(root string, gid int64, policy *v1.PodFSGroupChangePolicy, readOnly bool) error {
	if gid < 0 {
		return nil
	}
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch && !rootNeedsOwnership(root, gid, readOnly) {
		return nil
	}
	mask := groupReadWrite
	if readOnly {
		mask = groupReadOnly
	}
	return filepath.Walk(root, func(path string, info fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		bits := mask
		if info.IsDir() {
			bits |= groupSearch | os.ModeSetgid
		}
		// Lchown by root may clear setuid/setgid on files; start from the mode read
		// before it, as upstream does, and keep the special bits the file had.
		return os.Chmod(path, info.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)|bits)
	})
}

// rootNeedsOwnership reports whether root lacks the group, the group bits or the
// setgid bit that setVolumeOwnership would give it.
func rootNeedsOwnership(root string, gid int64, readOnly bool) bool {
	info, err := os.Stat(root)
	if err != nil || !info.IsDir() {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != gid {
		return true
	}
	want := groupReadWrite | groupSearch
	if readOnly {
		want = groupReadOnly | groupSearch
	}
	return info.Mode().Perm()&want != want || info.Mode()&os.ModeSetgid == 0
}

// fsUser is the user that owns a pod's service account token files: the runAsUser
// every init and regular container runs with (its own, else the pod's), or -1 when
// one of them has none or two of them differ. Upstream applies this whatever the
// user, root included.
func fsUser(pod *v1.Pod) int64 {
	user := int64(-1)
	containers := append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range containers {
		uid, ok := effectiveRunAsUser(pod, &containers[i])
		if !ok || (user >= 0 && uid != user) {
			return -1
		}
		user = uid
	}
	return user
}

func effectiveRunAsUser(pod *v1.Pod, c *v1.Container) (int64, bool) {
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser, true
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser, true
	}
	return 0, false
}

// ownedVolumes remembers which writable volumes this manager has already given to
// their pod's fsGroup. Like upstream's kubelet, which changes ownership when it sets a
// volume up rather than on every pod sync, the walk runs once per volume per kubelet
// process; a restarted kubelet walks again (Always) or checks the root
// (OnRootMismatch).
type ownedVolumes struct {
	mu   sync.Mutex
	done map[types.UID]map[string]bool
}

func (o *ownedVolumes) has(uid types.UID, name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done[uid][name]
}

func (o *ownedVolumes) add(uid types.UID, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done == nil {
		o.done = map[types.UID]map[string]bool{}
	}
	if o.done[uid] == nil {
		o.done[uid] = map[string]bool{}
	}
	o.done[uid][name] = true
}

func (o *ownedVolumes) forget(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.done, uid)
}

// ownVolume gives a writable volume to the pod's fsGroup, honouring its
// fsGroupChangePolicy, unless this manager did so already.
func (m *Manager) ownVolume(pod *v1.Pod, name, dir string) error {
	gid := fsGroup(pod)
	if gid < 0 || m.owned.has(pod.UID, name) {
		return nil
	}
	var policy *v1.PodFSGroupChangePolicy
	if sc := pod.Spec.SecurityContext; sc != nil {
		policy = sc.FSGroupChangePolicy
	}
	if err := setVolumeOwnership(dir, gid, policy, false); err != nil {
		return fmt.Errorf("changing ownership of %s to group %d: %w", dir, gid, err)
	}
	m.owned.add(pod.UID, name)
	return nil
}
