package server

import (
	"io/fs"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"
)

// volumeUsageTTL: how long a volume's walked usage is reused. Walking a big volume on
// every request would cost more than the figure is worth; upstream's du-based metrics
// are cached too.
const volumeUsageTTL = time.Minute

type volumeUsage struct {
	at           time.Time
	bytes, files uint64
}

// usageCache remembers volumes' walked usage by path.
type usageCache struct {
	mu      sync.Mutex
	entries map[string]volumeUsage
}

func (c *usageCache) get(path string, now time.Time) volumeUsage {
	c.mu.Lock()
	e, ok := c.entries[path]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < volumeUsageTTL {
		return e
	}
	e = walkUsage(path)
	e.at = now
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]volumeUsage{}
	}
	for p, old := range c.entries {
		if now.Sub(old.at) >= volumeUsageTTL {
			delete(c.entries, p)
		}
	}
	c.entries[path] = e
	c.mu.Unlock()
	return e
}

// walkUsage is the disk space (allocated blocks) and inodes under root, staying on its
// filesystem.
func walkUsage(root string) volumeUsage {
	var u volumeUsage
	var rootDev uint64
	if st, ok := statOf(root); ok {
		rootDev = st.Dev
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		st, ok := statOf(path)
		if !ok {
			return nil
		}
		if d.IsDir() && st.Dev != rootDev {
			return filepath.SkipDir
		}
		u.files++
		u.bytes += uint64(st.Blocks) * 512
		return nil
	})
	return u
}

func statOf(path string) (*syscall.Stat_t, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil, false
	}
	return &st, true
}

// volumeStats are the stats of the pod's volumes, by name.
func (s *Server) volumeStats(pod PodReference) []VolumeStats {
	if s.opts.PodVolumes == nil {
		return nil
	}
	now := time.Now()
	var out []VolumeStats
	for _, v := range s.opts.PodVolumes(pod.UID) {
		fsStats := filesystemStats(v.Path, now)
		if fsStats == nil {
			continue
		}
		u := s.usage.get(v.Path, now)
		fsStats.UsedBytes, fsStats.InodesUsed = &u.bytes, &u.files
		vs := VolumeStats{FsStats: *fsStats, Name: v.Name}
		if v.ClaimName != "" {
			vs.PVCRef = &PVCReference{Name: v.ClaimName, Namespace: pod.Namespace}
		}
		out = append(out, vs)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
