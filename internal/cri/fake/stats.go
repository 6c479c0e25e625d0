package fake

import (
	"context"
	"hash/fnv"
	"maps"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The fake's resource usage is synthetic but plausible: every running container uses
// about 10 millicores and a working set of 4-12 MiB that is stable per container ID.
const (
	fakeNanoCores = 10_000_000 // 10m
	mib           = 1 << 20
)

func workingSet(id string) uint64 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return 4*mib + uint64(h.Sum32()%(8*mib))
}

func (r *Runtime) containerStatsLocked(c *container, now int64) *runtimeapi.ContainerStats {
	r.refreshLocked(c, now)
	var cpuNanos, cores, mem uint64
	if c.startedAt != 0 {
		end := now
		if c.state == runtimeapi.ContainerState_CONTAINER_EXITED {
			end = c.finishedAt
		}
		cpuNanos = uint64(max(end-c.startedAt, 0)) / 100 // 10m of a core
	}
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		cores = fakeNanoCores
		mem = workingSet(c.id)
	}
	layer := uint64(32 * 1024)
	if b := r.behaviorLocked(c); b.WritableLayerBytes != 0 {
		layer = b.WritableLayerBytes
	}
	return &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id:       c.id,
			Metadata: &runtimeapi.ContainerMetadata{Name: c.meta.Name, Attempt: c.meta.Attempt},
			Labels:   maps.Clone(c.labels), Annotations: maps.Clone(c.annotations),
		},
		Cpu: &runtimeapi.CpuUsage{
			Timestamp:            now,
			UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpuNanos},
			UsageNanoCores:       &runtimeapi.UInt64Value{Value: cores},
		},
		Memory: &runtimeapi.MemoryUsage{
			Timestamp:       now,
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem},
			UsageBytes:      &runtimeapi.UInt64Value{Value: mem + mem/4},
			RssBytes:        &runtimeapi.UInt64Value{Value: mem - mem/4},
			AvailableBytes:  &runtimeapi.UInt64Value{Value: 0},
			PageFaults:      &runtimeapi.UInt64Value{Value: 0},
			MajorPageFaults: &runtimeapi.UInt64Value{Value: 0},
		},
		WritableLayer: &runtimeapi.FilesystemUsage{
			Timestamp:  now,
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/fake/containers"},
			UsedBytes:  &runtimeapi.UInt64Value{Value: layer},
			InodesUsed: &runtimeapi.UInt64Value{Value: 8},
		},
	}
}

// ContainerStats implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ContainerStats(_ context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[req.ContainerId]
	if !ok {
		return nil, notFound("container", req.ContainerId)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: r.containerStatsLocked(c, r.now())}, nil
}

// ListContainerStats implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ListContainerStats(_ context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: r.listContainerStats(req.GetFilter())}, nil
}

// StreamContainerStats implements runtimeapi.RuntimeServiceServer with a single message.
func (r *Runtime) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, s runtimeapi.RuntimeService_StreamContainerStatsServer) error {
	return s.Send(&runtimeapi.StreamContainerStatsResponse{ContainerStats: r.listContainerStats(req.GetFilter())})
}

func (r *Runtime) listContainerStats(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []*runtimeapi.ContainerStats
	for _, c := range r.containers {
		if f.GetId() != "" && f.Id != c.id || f.GetPodSandboxId() != "" && f.PodSandboxId != c.sandboxID ||
			!labelsMatch(c.labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, r.containerStatsLocked(c, now))
	}
	return out
}

func (r *Runtime) sandboxStatsLocked(sb *sandbox, now int64) *runtimeapi.PodSandboxStats {
	linux := &runtimeapi.LinuxPodSandboxStats{
		Cpu:     &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}},
		Memory:  &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{}, UsageBytes: &runtimeapi.UInt64Value{}},
		Process: &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{}},
		Network: &runtimeapi.NetworkUsage{Timestamp: now, DefaultInterface: &runtimeapi.NetworkInterfaceUsage{
			Name: "eth0", RxBytes: &runtimeapi.UInt64Value{}, TxBytes: &runtimeapi.UInt64Value{},
		}},
	}
	for _, c := range r.containers {
		if c.sandboxID != sb.id {
			continue
		}
		cs := r.containerStatsLocked(c, now)
		linux.Containers = append(linux.Containers, cs)
		linux.Cpu.UsageCoreNanoSeconds.Value += cs.Cpu.UsageCoreNanoSeconds.Value
		linux.Cpu.UsageNanoCores.Value += cs.Cpu.UsageNanoCores.Value
		linux.Memory.WorkingSetBytes.Value += cs.Memory.WorkingSetBytes.Value
		linux.Memory.UsageBytes.Value += cs.Memory.UsageBytes.Value
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			linux.Process.ProcessCount.Value++
		}
	}
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
		linux.Process.ProcessCount.Value++                 // the pause process
		traffic := uint64(max(now-sb.createdAt, 0)) / 1000 // ~1 KB/s each way
		linux.Network.DefaultInterface.RxBytes.Value = traffic
		linux.Network.DefaultInterface.TxBytes.Value = traffic
	}
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id: sb.id, Metadata: cloneSandboxMeta(sb.meta), Labels: maps.Clone(sb.labels), Annotations: maps.Clone(sb.annotations),
		},
		Linux: linux,
	}
}

// PodSandboxStats implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) PodSandboxStats(_ context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[req.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", req.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: r.sandboxStatsLocked(sb, r.now())}, nil
}

// ListPodSandboxStats implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ListPodSandboxStats(_ context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: r.listSandboxStats(req.GetFilter())}, nil
}

// StreamPodSandboxStats implements runtimeapi.RuntimeServiceServer with a single message.
func (r *Runtime) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, s runtimeapi.RuntimeService_StreamPodSandboxStatsServer) error {
	return s.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: r.listSandboxStats(req.GetFilter())})
}

func (r *Runtime) listSandboxStats(f *runtimeapi.PodSandboxStatsFilter) []*runtimeapi.PodSandboxStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var out []*runtimeapi.PodSandboxStats
	for _, sb := range r.sandboxes {
		if f.GetId() != "" && f.Id != sb.id || !labelsMatch(sb.labels, f.GetLabelSelector()) {
			continue
		}
		out = append(out, r.sandboxStatsLocked(sb, now))
	}
	return out
}

// ListMetricDescriptors implements runtimeapi.RuntimeServiceServer: the fake exports no
// extra metrics.
func (r *Runtime) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

// ListPodSandboxMetrics implements runtimeapi.RuntimeServiceServer.
func (r *Runtime) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}
