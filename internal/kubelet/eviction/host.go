package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cri "k8s.io/cri-api/pkg/apis"
)

// HostOptions configure the measurer of a real node.
type HostOptions struct {
	// RootDir is the kubelet's state directory: its filesystem is nodefs.
	RootDir string
	// ImageFsDir is a directory on the container runtime's image filesystem (imagefs).
	// When empty it is the mount point the runtime reports (ImageFsInfo) through
	// Images, or RootDir without one.
	ImageFsDir string
	Images     cri.ImageManagerService
	// Runtime gives the containers' memory working sets and writable layers.
	Runtime cri.RuntimeService
	// PodProcesses counts a pod's processes (its pids cgroup); pods count none when nil.
	PodProcesses func(uid types.UID) (int64, bool)
	// EmptyDirPath is where the pod's emptyDir volume of this name lives.
	EmptyDirPath func(pod *v1.Pod, volume string) string
	// LogDir is the pod's container log directory: a directory per container name.
	LogDir func(pod *v1.Pod) string
	// MemoryCgroup is the root of the cgroup v1 memory hierarchy; /sys/fs/cgroup/memory
	// when empty. Without one (cgroup v2) the working set comes from /proc/meminfo.
	MemoryCgroup string
	// ProcDir is /proc when empty.
	ProcDir string
}

// Host measures the machine the kubelet runs on.
type Host struct {
	opts HostOptions
}

var _ Measurer = (*Host)(nil)

// NewHost returns the measurer of the real node.
func NewHost(opts HostOptions) (*Host, error) {
	if opts.RootDir == "" || opts.Runtime == nil || opts.EmptyDirPath == nil || opts.LogDir == nil {
		return nil, errors.New("eviction: RootDir, Runtime, EmptyDirPath and LogDir are required")
	}
	if opts.MemoryCgroup == "" {
		opts.MemoryCgroup = "/sys/fs/cgroup/memory"
	}
	if opts.ProcDir == "" {
		opts.ProcDir = "/proc"
	}
	return &Host{opts: opts}, nil
}

// Node measures memory, both filesystems and process IDs.
func (h *Host) Node(ctx context.Context) (NodeStats, error) {
	var n NodeStats
	var errs []error
	if mem, err := h.memory(); err == nil {
		n.Memory = &mem
	} else {
		errs = append(errs, err)
	}
	if fs, err := statFs(h.opts.RootDir); err == nil {
		n.NodeFs = &fs
	} else {
		errs = append(errs, err)
	}
	if fs, err := statFs(h.imageFsDir(ctx)); err == nil {
		n.ImageFs = &fs
	} else {
		errs = append(errs, err)
	}
	if pids, err := h.pids(); err == nil {
		n.PIDs = &pids
	} else {
		errs = append(errs, err)
	}
	if n.Memory == nil && n.NodeFs == nil && n.ImageFs == nil && n.PIDs == nil {
		return n, errors.Join(errs...)
	}
	return n, nil
}

// imageFsDir is where imagefs is: as configured, else the runtime's image
// filesystem's mount point, else the kubelet's root directory.
func (h *Host) imageFsDir(ctx context.Context) string {
	if h.opts.ImageFsDir != "" {
		return h.opts.ImageFsDir
	}
	if h.opts.Images != nil {
		if info, err := h.opts.Images.ImageFsInfo(ctx); err == nil {
			for _, fs := range info.GetImageFilesystems() {
				if mp := fs.GetFsId().GetMountpoint(); mp != "" {
					return mp
				}
			}
		}
	}
	return h.opts.RootDir
}

// memory is the node's memory capacity (MemTotal) less its working set: on cgroup v1
// the root memory cgroup's usage less its inactive file pages, as upstream computes
// it; otherwise the same from /proc/meminfo.
func (h *Host) memory() (Observation, error) {
	info, err := os.ReadFile(filepath.Join(h.opts.ProcDir, "meminfo"))
	if err != nil {
		return Observation{}, err
	}
	mem, err := parseMeminfo(string(info))
	if err != nil {
		return Observation{}, err
	}
	capacity := mem["MemTotal"]
	workingSet := capacity - mem["MemFree"] - mem["Inactive(file)"]
	if usage, err := os.ReadFile(filepath.Join(h.opts.MemoryCgroup, "memory.usage_in_bytes")); err == nil {
		stat, err := os.ReadFile(filepath.Join(h.opts.MemoryCgroup, "memory.stat"))
		if err != nil {
			return Observation{}, err
		}
		if workingSet, err = cgroupV1WorkingSet(string(usage), string(stat)); err != nil {
			return Observation{}, err
		}
	}
	return Observation{Available: max(capacity-workingSet, 0), Capacity: capacity}, nil
}

// parseMeminfo reads /proc/meminfo's fields, in bytes.
func parseMeminfo(text string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(text, "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		out[key] = v
	}
	if out["MemTotal"] == 0 {
		return nil, errors.New("eviction: no MemTotal in meminfo")
	}
	return out, nil
}

// cgroupV1WorkingSet is a v1 memory cgroup's working set: its usage less its
// total_inactive_file, never below zero.
func cgroupV1WorkingSet(usage, stat string) (int64, error) {
	used, err := strconv.ParseInt(strings.TrimSpace(usage), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("eviction: memory.usage_in_bytes: %w", err)
	}
	for _, line := range strings.Split(stat, "\n") {
		if v, ok := strings.CutPrefix(line, "total_inactive_file "); ok {
			inactive, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("eviction: memory.stat: %w", err)
			}
			return max(used-inactive, 0), nil
		}
	}
	return used, nil
}

func statFs(path string) (FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsStats{}, fmt.Errorf("eviction: statfs %s: %w", path, err)
	}
	return FsStats{
		AvailableBytes: int64(st.Bavail) * st.Bsize,
		CapacityBytes:  int64(st.Blocks) * st.Bsize,
		InodesFree:     int64(st.Ffree),
		Inodes:         int64(st.Files),
	}, nil
}

// pids is the node's process ID limit (the smaller of pid_max and threads-max, as
// upstream reads it) less the tasks running now.
func (h *Host) pids() (Observation, error) {
	limit := int64(-1)
	for _, name := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		b, err := os.ReadFile(filepath.Join(h.opts.ProcDir, name))
		if err != nil {
			return Observation{}, err
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return Observation{}, fmt.Errorf("eviction: %s: %w", name, err)
		}
		if limit < 0 || v < limit {
			limit = v
		}
	}
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return Observation{}, err
	}
	return Observation{Available: max(limit-int64(info.Procs), 0), Capacity: limit}, nil
}

// Pods measures the pods' containers through the runtime's stats, their logs and
// emptyDirs on disk, and their processes in their cgroups.
func (h *Host) Pods(ctx context.Context, pods []*v1.Pod) (map[types.UID]PodStats, error) {
	stats, err := newestContainerStats(ctx, h.opts.Runtime)
	if err != nil {
		return nil, err
	}
	out := make(map[types.UID]PodStats, len(pods))
	for _, pod := range pods {
		byName, ok := stats[string(pod.UID)]
		if !ok {
			continue // not measured: upstream ranks such a pod first
		}
		var s PodStats
		logDir := h.opts.LogDir(pod)
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range list {
				st, ok := byName[c.Name]
				if !ok {
					continue
				}
				cs := ContainerStats{
					Name:             c.Name,
					MemoryWorkingSet: int64(st.GetMemory().GetWorkingSetBytes().GetValue()),
					RootfsBytes:      int64(st.GetWritableLayer().GetUsedBytes().GetValue()),
					RootfsInodes:     int64(st.GetWritableLayer().GetInodesUsed().GetValue()),
				}
				if u, ok, _ := diskUsage(filepath.Join(logDir, c.Name)); ok {
					cs.LogsBytes, cs.LogsInodes = u.bytes, u.inodes
				}
				s.Containers = append(s.Containers, cs)
			}
		}
		for i := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[i]
			if vol.EmptyDir == nil || vol.EmptyDir.Medium != v1.StorageMediumDefault {
				continue
			}
			if u, ok, _ := diskUsage(h.opts.EmptyDirPath(pod, vol.Name)); ok {
				s.VolumeBytes += u.bytes
				s.VolumeInodes += u.inodes
			}
		}
		if h.opts.PodProcesses != nil {
			s.Processes, _ = h.opts.PodProcesses(pod.UID)
		}
		out[pod.UID] = s
	}
	return out, nil
}
