package eviction

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Labels the kubelet puts on its containers, by which their stats are matched to pods.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// systemCriticalPriority is the priority from which upstream never evicts a pod.
const systemCriticalPriority = 2_000_000_000

// Options configure a Monitor. Every field but Period and Logger is required.
type Options struct {
	// Runtime gives the containers' writable layer usage (ContainerStats).
	Runtime cri.RuntimeService
	// Pods lists the pods the node runs that may be evicted: not terminal, not being
	// deleted.
	Pods func() []*v1.Pod
	// EmptyDirPath is where the pod's emptyDir volume of this name lives.
	EmptyDirPath func(pod *v1.Pod, volume string) string
	// LogDir is the pod's container log directory: a directory per container name.
	LogDir func(pod *v1.Pod) string
	// Evict is called with each pod over a limit and upstream's message; it must not
	// block for long.
	Evict func(pod *v1.Pod, message string)
	// Period is how often the pods are measured; 10s when zero, as upstream's
	// eviction manager.
	Period time.Duration
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Monitor measures the node's pods periodically and evicts those over a limit.
type Monitor struct {
	opts Options
}

// New returns a Monitor; Run starts it.
func New(opts Options) (*Monitor, error) {
	if opts.Runtime == nil || opts.Pods == nil || opts.EmptyDirPath == nil || opts.LogDir == nil || opts.Evict == nil || opts.Clock == nil {
		return nil, errors.New("eviction: Runtime, Pods, EmptyDirPath, LogDir, Evict and Clock are required")
	}
	if opts.Period <= 0 {
		opts.Period = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Monitor{opts: opts}, nil
}

// Run checks the pods every Period until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	t := m.opts.Clock.NewTicker(m.opts.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			m.Sync(ctx)
		}
	}
}

// Sync measures every pod with a local storage limit once and evicts those over one.
func (m *Monitor) Sync(ctx context.Context) {
	var pods []*v1.Pod
	needStats := false
	for _, pod := range m.opts.Pods() {
		if isCritical(pod) || !HasLimits(pod) {
			continue
		}
		pods = append(pods, pod)
		needStats = needStats || NeedsContainerUsage(pod)
	}
	if len(pods) == 0 {
		return
	}
	var layers map[string]map[string]int64
	if needStats {
		var err error
		if layers, err = m.writableLayers(ctx); err != nil {
			m.opts.Logger.Error("eviction: reading container stats", "err", err)
			return
		}
	}
	for _, pod := range pods {
		if ctx.Err() != nil {
			return
		}
		if msg := Check(pod, m.measure(pod, layers[string(pod.UID)])); msg != "" {
			m.opts.Logger.Info("evicting pod over its local storage limit", "pod", pod.Namespace+"/"+pod.Name, "message", msg)
			m.opts.Evict(pod, msg)
		}
	}
}

// isCritical reports whether upstream would never evict the pod: a static or mirror
// pod, or one of system-critical priority.
func isCritical(pod *v1.Pod) bool {
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; ok {
		return true
	}
	if src, ok := pod.Annotations["kubernetes.io/config.source"]; ok && src != "api" {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// writableLayers returns each pod's containers' writable layer usage, by pod UID and
// container name, from the newest instance of each container.
func (m *Monitor) writableLayers(ctx context.Context) (map[string]map[string]int64, error) {
	stats, err := newestContainerStats(ctx, m.opts.Runtime)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]int64, len(stats))
	for uid, byName := range stats {
		out[uid] = make(map[string]int64, len(byName))
		for name, st := range byName {
			out[uid][name] = int64(st.GetWritableLayer().GetUsedBytes().GetValue())
		}
	}
	return out, nil
}

// newestContainerStats returns the runtime's stats of each pod's containers, by pod
// UID and container name, from the newest instance of each container.
func newestContainerStats(ctx context.Context, rt cri.RuntimeService) (map[string]map[string]*runtimeapi.ContainerStats, error) {
	stats, err := rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]*runtimeapi.ContainerStats{}
	for _, st := range stats {
		attrs := st.GetAttributes()
		uid, name := attrs.GetLabels()[labelPodUID], attrs.GetLabels()[labelContainerName]
		if uid == "" || name == "" {
			continue
		}
		if out[uid] == nil {
			out[uid] = map[string]*runtimeapi.ContainerStats{}
		}
		if prev, ok := out[uid][name]; ok && prev.GetAttributes().GetMetadata().GetAttempt() > attrs.GetMetadata().GetAttempt() {
			continue
		}
		out[uid][name] = st
	}
	return out, nil
}

// measure reads the pod's emptyDirs' and containers' usage; layers are its containers'
// writable layers by name.
func (m *Monitor) measure(pod *v1.Pod, layers map[string]int64) Usage {
	u := Usage{EmptyDirs: map[string]int64{}, Containers: map[string]int64{}}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		// A disk-backed emptyDir counts towards the pod's total; any emptyDir with a
		// sizeLimit is checked against it.
		if vol.EmptyDir == nil || vol.EmptyDir.Medium != v1.StorageMediumDefault && sizeLimit(vol) == nil {
			continue
		}
		if used, ok := m.diskUsage(m.opts.EmptyDirPath(pod, vol.Name)); ok {
			u.EmptyDirs[vol.Name] = used
		}
	}
	if NeedsContainerUsage(pod) {
		logDir := m.opts.LogDir(pod)
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range list {
				used, ok := layers[c.Name]
				if logs, found := m.diskUsage(filepath.Join(logDir, c.Name)); found {
					used += logs
					ok = true
				}
				if ok {
					u.Containers[c.Name] = used
				}
			}
		}
	}
	return u
}

// diskUsage is the space the files under dir take on disk, as du counts it (allocated
// blocks, a hard-linked file once); ok is false when dir does not exist.
func (m *Monitor) diskUsage(dir string) (int64, bool) {
	u, ok, err := diskUsage(dir)
	if err != nil {
		m.opts.Logger.Error("eviction: measuring disk usage", "dir", dir, "err", err)
	}
	return u.bytes, ok
}

// dirUsage is what a directory tree takes: bytes allocated and inodes.
type dirUsage struct{ bytes, inodes int64 }

// diskUsage measures the tree under dir as du does (allocated blocks, a hard-linked
// file once); ok is false when dir does not exist.
func diskUsage(dir string) (dirUsage, bool, error) {
	if _, err := os.Lstat(dir); err != nil {
		return dirUsage{}, false, nil
	}
	type inode struct{ dev, ino uint64 }
	linked := map[inode]bool{}
	var u dirUsage
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: count what can be read
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			u.bytes += info.Size()
			u.inodes++
			return nil
		}
		if st.Nlink > 1 && !info.IsDir() {
			key := inode{uint64(st.Dev), st.Ino}
			if linked[key] {
				return nil
			}
			linked[key] = true
		}
		u.bytes += st.Blocks * 512
		u.inodes++
		return nil
	})
	return u, true, err
}
