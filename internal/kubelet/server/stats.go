package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The JSON of /stats/summary, shaped as upstream's stats/v1alpha1 types (only the
// fields this kubelet fills).

// Summary is the node's and its pods' resource usage.
type Summary struct {
	Node NodeStats  `json:"node"`
	Pods []PodStats `json:"pods"`
}

// NodeStats is the node's usage.
type NodeStats struct {
	NodeName  string       `json:"nodeName"`
	StartTime metav1.Time  `json:"startTime"`
	CPU       *CPUStats    `json:"cpu,omitempty"`
	Memory    *MemoryStats `json:"memory,omitempty"`
	Fs        *FsStats     `json:"fs,omitempty"`
}

// PodReference names a pod.
type PodReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	UID       string `json:"uid"`
}

// PodStats is one pod's usage: the sum of its containers'.
type PodStats struct {
	PodRef     PodReference     `json:"podRef"`
	StartTime  metav1.Time      `json:"startTime"`
	Containers []ContainerStats `json:"containers"`
	CPU        *CPUStats        `json:"cpu,omitempty"`
	Memory     *MemoryStats     `json:"memory,omitempty"`
	Volumes    []VolumeStats    `json:"volume,omitempty"`
}

// PodVolume is a volume of a pod on this node, for its stats.
type PodVolume struct {
	Name string
	Path string
	// ClaimName is the PersistentVolumeClaim behind the volume, if any (in the pod's
	// namespace).
	ClaimName string
}

// VolumeStats is one pod volume's usage, as upstream's (the filesystem holding it, and
// the bytes and inodes under it).
type VolumeStats struct {
	FsStats
	Name   string        `json:"name"`
	PVCRef *PVCReference `json:"pvcRef,omitempty"`
}

// PVCReference names the claim behind a volume.
type PVCReference struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ContainerStats is one container's usage.
type ContainerStats struct {
	Name      string       `json:"name"`
	StartTime metav1.Time  `json:"startTime"`
	CPU       *CPUStats    `json:"cpu,omitempty"`
	Memory    *MemoryStats `json:"memory,omitempty"`
	Rootfs    *FsStats     `json:"rootfs,omitempty"`
}

// SampleTime is when a usage figure was read. Unlike metav1.Time it keeps the fraction
// of a second in JSON (RFC 3339 with nanoseconds, which metav1.Time and upstream's
// clients parse too): a rate between two samples a few seconds apart, as the metrics
// server computes, would otherwise be off by up to a second's worth.
type SampleTime struct{ time.Time }

// MarshalJSON writes the time in UTC with nanoseconds.
func (t SampleTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON reads RFC 3339 with or without a fraction of a second, or null.
func (t *SampleTime) UnmarshalJSON(b []byte) error {
	var str *string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	if str == nil {
		t.Time = time.Time{}
		return nil
	}
	parsed, err := time.Parse(time.RFC3339Nano, *str)
	if err != nil {
		return err
	}
	t.Time = parsed
	return nil
}

// CPUStats is CPU usage: a rate and a cumulative total.
type CPUStats struct {
	Time                 SampleTime `json:"time"`
	UsageNanoCores       *uint64    `json:"usageNanoCores,omitempty"`
	UsageCoreNanoSeconds *uint64    `json:"usageCoreNanoSeconds,omitempty"`
}

// MemoryStats is memory usage.
type MemoryStats struct {
	Time            SampleTime `json:"time"`
	AvailableBytes  *uint64    `json:"availableBytes,omitempty"`
	UsageBytes      *uint64    `json:"usageBytes,omitempty"`
	WorkingSetBytes *uint64    `json:"workingSetBytes,omitempty"`
	RSSBytes        *uint64    `json:"rssBytes,omitempty"`
	PageFaults      *uint64    `json:"pageFaults,omitempty"`
	MajorPageFaults *uint64    `json:"majorPageFaults,omitempty"`
}

// FsStats is a filesystem's usage.
type FsStats struct {
	Time           SampleTime `json:"time"`
	AvailableBytes *uint64    `json:"availableBytes,omitempty"`
	CapacityBytes  *uint64    `json:"capacityBytes,omitempty"`
	UsedBytes      *uint64    `json:"usedBytes,omitempty"`
	InodesFree     *uint64    `json:"inodesFree,omitempty"`
	Inodes         *uint64    `json:"inodes,omitempty"`
	InodesUsed     *uint64    `json:"inodesUsed,omitempty"`
}

func (s *Server) serveSummary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.summary(r.Context())
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// runningWithStats lists the running pods and containers, and the runtime's stats of
// the containers by ID.
func (s *Server) runningWithStats(ctx context.Context) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, map[string]*runtimeapi.ContainerStats, error) {
	sandboxes, containers, err := s.listRunning(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	stats, err := s.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, nil, nil, err
	}
	statsByID := map[string]*runtimeapi.ContainerStats{}
	for _, st := range stats {
		statsByID[st.GetAttributes().GetId()] = st
	}
	return sandboxes, containers, statsByID, nil
}

// summary gathers the pods' usage from the runtime's container stats and the node's
// from /proc.
func (s *Server) summary(ctx context.Context) (*Summary, error) {
	sandboxes, containers, statsByID, err := s.runningWithStats(ctx)
	if err != nil {
		return nil, err
	}
	pods := map[string]*PodStats{}
	var order []string
	for _, sb := range sandboxes {
		md := sb.GetMetadata()
		pods[sb.Id] = &PodStats{
			PodRef:     PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime:  metav1.NewTime(time.Unix(0, sb.CreatedAt)),
			Containers: []ContainerStats{},
		}
		order = append(order, sb.Id)
	}
	for _, c := range containers {
		pod := pods[c.PodSandboxId]
		if pod == nil {
			continue
		}
		cs := ContainerStats{Name: c.GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
		if st := statsByID[c.Id]; st != nil {
			cs.CPU, cs.Memory, cs.Rootfs = cpuStats(st.Cpu), memoryStats(st.Memory), fsStats(st.WritableLayer)
		}
		pod.Containers = append(pod.Containers, cs)
		pod.CPU = addCPU(pod.CPU, cs.CPU)
		pod.Memory = addMemory(pod.Memory, cs.Memory)
	}
	sum := &Summary{Node: s.nodeStats(), Pods: []PodStats{}}
	sort.Slice(order, func(i, j int) bool {
		a, b := pods[order[i]].PodRef, pods[order[j]].PodRef
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	for _, id := range order {
		sort.Slice(pods[id].Containers, func(i, j int) bool { return pods[id].Containers[i].Name < pods[id].Containers[j].Name })
		pods[id].Volumes = s.volumeStats(pods[id].PodRef)
		sum.Pods = append(sum.Pods, *pods[id])
	}
	return sum, nil
}

func u64(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.Value
	return &x
}

func cpuStats(c *runtimeapi.CpuUsage) *CPUStats {
	if c == nil {
		return nil
	}
	return &CPUStats{Time: SampleTime{time.Unix(0, c.Timestamp)}, UsageNanoCores: u64(c.UsageNanoCores), UsageCoreNanoSeconds: u64(c.UsageCoreNanoSeconds)}
}

func memoryStats(m *runtimeapi.MemoryUsage) *MemoryStats {
	if m == nil {
		return nil
	}
	return &MemoryStats{
		Time: SampleTime{time.Unix(0, m.Timestamp)}, AvailableBytes: u64(m.AvailableBytes), UsageBytes: u64(m.UsageBytes),
		WorkingSetBytes: u64(m.WorkingSetBytes), RSSBytes: u64(m.RssBytes), PageFaults: u64(m.PageFaults), MajorPageFaults: u64(m.MajorPageFaults),
	}
}

func fsStats(f *runtimeapi.FilesystemUsage) *FsStats {
	if f == nil {
		return nil
	}
	return &FsStats{Time: SampleTime{time.Unix(0, f.Timestamp)}, UsedBytes: u64(f.UsedBytes), InodesUsed: u64(f.InodesUsed)}
}

func addU64(a, b *uint64) *uint64 {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		x := *b
		return &x
	case b == nil:
		return a
	}
	x := *a + *b
	return &x
}

func addCPU(sum, c *CPUStats) *CPUStats {
	if c == nil {
		return sum
	}
	if sum == nil {
		sum = &CPUStats{Time: c.Time}
	}
	sum.UsageNanoCores = addU64(sum.UsageNanoCores, c.UsageNanoCores)
	sum.UsageCoreNanoSeconds = addU64(sum.UsageCoreNanoSeconds, c.UsageCoreNanoSeconds)
	return sum
}

func addMemory(sum, m *MemoryStats) *MemoryStats {
	if m == nil {
		return sum
	}
	if sum == nil {
		sum = &MemoryStats{Time: m.Time}
	}
	sum.UsageBytes = addU64(sum.UsageBytes, m.UsageBytes)
	sum.WorkingSetBytes = addU64(sum.WorkingSetBytes, m.WorkingSetBytes)
	sum.RSSBytes = addU64(sum.RSSBytes, m.RSSBytes)
	sum.PageFaults = addU64(sum.PageFaults, m.PageFaults)
	sum.MajorPageFaults = addU64(sum.MajorPageFaults, m.MajorPageFaults)
	return sum
}

// cpuSample is the node's cumulative CPU time at one moment.
type cpuSample struct {
	at        time.Time
	usageNano uint64
}

// nodeStats reads the node's CPU and memory from /proc; the CPU rate is measured
// between this call and the previous one.
func (s *Server) nodeStats() NodeStats {
	now := time.Now()
	ns := NodeStats{NodeName: s.opts.NodeName, StartTime: metav1.NewTime(bootTime())}
	if used, ok := readCPUNanos(); ok {
		cpu := &CPUStats{Time: SampleTime{now}, UsageCoreNanoSeconds: &used}
		s.cpuMu.Lock()
		if prev := s.lastCPU; prev != nil && now.After(prev.at) && used >= prev.usageNano {
			rate := uint64(float64(used-prev.usageNano) / now.Sub(prev.at).Seconds())
			cpu.UsageNanoCores = &rate
		}
		s.lastCPU = &cpuSample{at: now, usageNano: used}
		s.cpuMu.Unlock()
		ns.CPU = cpu
	}
	ns.Memory = nodeMemory(now)
	if s.opts.RootDir != "" {
		ns.Fs = filesystemStats(s.opts.RootDir, now)
	}
	return ns
}

// nodeMemory is the node's memory from /proc/meminfo, or nil.
func nodeMemory(now time.Time) *MemoryStats {
	mem, ok := readMeminfo()
	if !ok {
		return nil
	}
	total, avail := mem["MemTotal"], mem["MemAvailable"]
	usage := total - mem["MemFree"]
	// Working set as upstream counts it: usage minus inactive file pages.
	ws := usage
	if inactive := mem["Inactive(file)"]; inactive < ws {
		ws -= inactive
	}
	return &MemoryStats{Time: SampleTime{now}, AvailableBytes: &avail, UsageBytes: &usage, WorkingSetBytes: &ws}
}

// filesystemStats is the usage of the filesystem holding dir, or nil.
func filesystemStats(dir string, now time.Time) *FsStats {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil
	}
	bsize := uint64(st.Bsize)
	capacity, avail := st.Blocks*bsize, st.Bavail*bsize
	used := (st.Blocks - st.Bfree) * bsize
	inodes, free := st.Files, st.Ffree
	inodesUsed := inodes - free
	return &FsStats{Time: SampleTime{now}, AvailableBytes: &avail, CapacityBytes: &capacity, UsedBytes: &used,
		Inodes: &inodes, InodesFree: &free, InodesUsed: &inodesUsed}
}

// userHZ is the unit of /proc/stat's CPU times on Linux.
const userHZ = 100

// readCPUNanos returns the CPU time all cores spent busy since boot.
func readCPUNanos() (uint64, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[0] != "cpu" {
			continue
		}
		var busy uint64
		for i, v := range fields[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			n, _ := strconv.ParseUint(v, 10, 64)
			busy += n
		}
		return busy * (1e9 / userHZ), true
	}
	return 0, false
}

// readMeminfo returns /proc/meminfo in bytes.
func readMeminfo() (map[string]uint64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			n *= 1024
		}
		out[key] = n
	}
	return out, len(out) > 0
}

// bootTime is when the machine started, from /proc/stat's btime.
func bootTime() time.Time {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(n, 0)
		}
	}
	return time.Time{}
}

// serveResourceMetrics answers /metrics/resource in the Prometheus text format, with
// upstream's metric names, from the same figures as the summary.
func (s *Server) serveResourceMetrics(w http.ResponseWriter, r *http.Request) {
	sum, err := s.summary(r.Context())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	var b strings.Builder
	metric := func(name, help, typ string) { fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ) }
	sample := func(name, labels string, v float64, t SampleTime) {
		if labels != "" {
			labels = "{" + labels + "}"
		}
		fmt.Fprintf(&b, "%s%s %s %d\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64), t.UnixMilli())
	}
	scrapeError := 0.0
	if err != nil {
		scrapeError = 1
		sum = &Summary{}
	}
	podLabels := func(p PodStats) string {
		return fmt.Sprintf(`namespace=%q,pod=%q`, p.PodRef.Namespace, p.PodRef.Name)
	}
	ctrLabels := func(p PodStats, c ContainerStats) string {
		return fmt.Sprintf(`container=%q,namespace=%q,pod=%q`, c.Name, p.PodRef.Namespace, p.PodRef.Name)
	}
	metric("container_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter")
	for _, p := range sum.Pods {
		for _, c := range p.Containers {
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				sample("container_cpu_usage_seconds_total", ctrLabels(p, c), float64(*c.CPU.UsageCoreNanoSeconds)/1e9, c.CPU.Time)
			}
		}
	}
	metric("container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes", "gauge")
	for _, p := range sum.Pods {
		for _, c := range p.Containers {
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				sample("container_memory_working_set_bytes", ctrLabels(p, c), float64(*c.Memory.WorkingSetBytes), c.Memory.Time)
			}
		}
	}
	metric("container_start_time_seconds", "[STABLE] Start time of the container since unix epoch in seconds", "gauge")
	for _, p := range sum.Pods {
		for _, c := range p.Containers {
			fmt.Fprintf(&b, "container_start_time_seconds{%s} %s\n", ctrLabels(p, c), strconv.FormatFloat(float64(c.StartTime.UnixNano())/1e9, 'g', -1, 64))
		}
	}
	if n := sum.Node; n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		metric("node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter")
		sample("node_cpu_usage_seconds_total", "", float64(*n.CPU.UsageCoreNanoSeconds)/1e9, n.CPU.Time)
	}
	if n := sum.Node; n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		metric("node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge")
		sample("node_memory_working_set_bytes", "", float64(*n.Memory.WorkingSetBytes), n.Memory.Time)
	}
	metric("pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds", "counter")
	for _, p := range sum.Pods {
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			sample("pod_cpu_usage_seconds_total", podLabels(p), float64(*p.CPU.UsageCoreNanoSeconds)/1e9, p.CPU.Time)
		}
	}
	metric("pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge")
	for _, p := range sum.Pods {
		if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
			sample("pod_memory_working_set_bytes", podLabels(p), float64(*p.Memory.WorkingSetBytes), p.Memory.Time)
		}
	}
	metric("resource_scrape_error", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge")
	fmt.Fprintf(&b, "resource_scrape_error %g\n", scrapeError)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}
