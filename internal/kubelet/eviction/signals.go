package eviction

import (
	"context"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	v1 "k8s.io/api/core/v1"
)

// Measurer measures the node and its pods. The real one reads the host (NewHostMeasurer);
// tests feed values.
type Measurer interface {
	// Node measures the node's signals.
	Node(ctx context.Context) (NodeStats, error)
	// Pods measures the given pods' usage, by UID; a pod it could not measure is absent.
	Pods(ctx context.Context, pods []*v1.Pod) (map[types.UID]PodStats, error)
}

// NodeStats is one measurement of the node; a nil field was not measured, and its
// signals are never met.
type NodeStats struct {
	// Memory is in bytes: available is the capacity less the working set.
	Memory *Observation
	// NodeFs is the filesystem of the kubelet's root directory, ImageFs that of the
	// container runtime's images. When both are one filesystem, ImageFs repeats NodeFs
	// and its thresholds apply to it too, as upstream's do.
	NodeFs, ImageFs *FsStats
	// PIDs is the number of process IDs left and the most the node has.
	PIDs *Observation
}

// Observation is how much of a resource is available, out of its capacity.
type Observation struct {
	Available, Capacity int64
}

// FsStats is a filesystem's free space and inodes.
type FsStats struct {
	AvailableBytes, CapacityBytes int64
	InodesFree, Inodes            int64
}

// PodStats is one pod's measured usage.
type PodStats struct {
	Containers []ContainerStats
	// VolumeBytes and VolumeInodes are its disk-backed local volumes' (emptyDirs').
	VolumeBytes, VolumeInodes int64
	// Processes counts the pod's processes (threads included, as the pids cgroup does).
	Processes int64
}

// ContainerStats is one container's measured usage.
type ContainerStats struct {
	Name string
	// MemoryWorkingSet is in bytes.
	MemoryWorkingSet int64
	// RootfsBytes and RootfsInodes are the writable layer's; LogsBytes and LogsInodes
	// its log files'.
	RootfsBytes, RootfsInodes int64
	LogsBytes, LogsInodes     int64
}

// observations turns a node measurement into each signal's observation.
func (n NodeStats) observations() map[Signal]Observation {
	out := map[Signal]Observation{}
	if n.Memory != nil {
		out[SignalMemoryAvailable] = *n.Memory
	}
	if fs := n.NodeFs; fs != nil {
		out[SignalNodeFsAvailable] = Observation{Available: fs.AvailableBytes, Capacity: fs.CapacityBytes}
		if fs.Inodes > 0 {
			out[SignalNodeFsInodesFree] = Observation{Available: fs.InodesFree, Capacity: fs.Inodes}
		}
	}
	if fs := n.ImageFs; fs != nil {
		out[SignalImageFsAvailable] = Observation{Available: fs.AvailableBytes, Capacity: fs.CapacityBytes}
		if fs.Inodes > 0 {
			out[SignalImageFsInodesFree] = Observation{Available: fs.InodesFree, Capacity: fs.Inodes}
		}
	}
	if n.PIDs != nil {
		out[SignalPIDAvailable] = *n.PIDs
	}
	return out
}

// quantity is an amount of the signal's resource as upstream prints it in messages.
func (s Signal) quantity(v int64) *resource.Quantity {
	switch s.resource() {
	case resourceInodes, resourcePIDs:
		return resource.NewQuantity(v, resource.DecimalSI)
	default:
		return resource.NewQuantity(v, resource.BinarySI)
	}
}

// met reports whether the threshold is met by the observations: available below the
// threshold's value, plus its minimum reclaim when enforceMinReclaim is set (a
// threshold being acted on stays met until that much more is free).
func (t Threshold) met(obs map[Signal]Observation, enforceMinReclaim bool) bool {
	o, ok := obs[t.Signal]
	if !ok {
		return false
	}
	want := t.Value.of(o.Capacity)
	if enforceMinReclaim && t.MinReclaim != nil {
		want += t.MinReclaim.of(o.Capacity)
	}
	return o.Available < want
}

// thresholdsMet returns the thresholds the observations meet.
func thresholdsMet(ts []Threshold, obs map[Signal]Observation, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		if t.met(obs, enforceMinReclaim) {
			out = append(out, t)
		}
	}
	return out
}
