package server

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cadvisorHandler serves /metrics/cadvisor: what upstream's kubelet exposes from its
// embedded cAdvisor, under cAdvisor's names and labels, for what this kubelet knows
// from the runtime's stats and /proc. Each running container has a series (container
// set), each running pod one for its cgroup (container=""), and the machine one for
// the root cgroup (id="/"), as cAdvisor's.
func (s *Server) cadvisorHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&cadvisorCollector{s: s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// cAdvisor's labels of a container's series, in its order.
var cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

func cadvisorDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, append(append([]string{}, cadvisorLabels...), extra...), nil)
}

var (
	cadvisorCPU        = cadvisorDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", "cpu")
	cadvisorMemUsage   = cadvisorDesc("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed")
	cadvisorWorkingSet = cadvisorDesc("container_memory_working_set_bytes", "Current working set in bytes.")
	cadvisorRSS        = cadvisorDesc("container_memory_rss", "Size of RSS in bytes.")
	cadvisorStart      = cadvisorDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds.")
	cadvisorLastSeen   = cadvisorDesc("container_last_seen", "Last time a container was seen by the exporter")
	cadvisorRxBytes    = cadvisorDesc("container_network_receive_bytes_total", "Cumulative count of bytes received", "interface")
	cadvisorRxErrors   = cadvisorDesc("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", "interface")
	cadvisorTxBytes    = cadvisorDesc("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", "interface")
	cadvisorTxErrors   = cadvisorDesc("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", "interface")
	cadvisorScrapeErr  = prometheus.NewDesc("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
	machineLabels      = []string{"boot_id", "machine_id", "system_uuid"}
	machineCores       = prometheus.NewDesc("machine_cpu_cores", "Number of logical CPU cores.", machineLabels, nil)
	machineMemory      = prometheus.NewDesc("machine_memory_bytes", "Amount of memory installed on the machine.", machineLabels, nil)
)

// cadvisorCollector reads the runtime and /proc when scraped.
type cadvisorCollector struct{ s *Server }

func (c *cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cadvisorCPU, cadvisorMemUsage, cadvisorWorkingSet, cadvisorRSS, cadvisorStart, cadvisorLastSeen,
		cadvisorRxBytes, cadvisorRxErrors, cadvisorTxBytes, cadvisorTxErrors, cadvisorScrapeErr, machineCores, machineMemory} {
		ch <- d
	}
}

// cgroupSeries is one cgroup's figures: a container's, a pod's or the machine's.
type cgroupSeries struct {
	labels  []string // the values of cadvisorLabels
	started time.Time
	cpu     *CPUStats
	memory  *MemoryStats
	network *runtimeapi.NetworkUsage
}

func (c *cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	series, err := c.s.cgroupSeries(ctx)
	scrapeErr := 0.0
	if err != nil {
		c.s.log.Warn("reading container stats for /metrics/cadvisor", "err", err)
		scrapeErr = 1
	}
	ch <- prometheus.MustNewConstMetric(cadvisorScrapeErr, prometheus.GaugeValue, scrapeErr)
	now := float64(time.Now().Unix())
	emit := func(d *prometheus.Desc, typ prometheus.ValueType, v float64, at time.Time, labels []string, extra ...string) {
		m := prometheus.MustNewConstMetric(d, typ, v, append(append([]string{}, labels...), extra...)...)
		if !at.IsZero() {
			m = prometheus.NewMetricWithTimestamp(at, m)
		}
		ch <- m
	}
	for _, cs := range series {
		emit(cadvisorLastSeen, prometheus.GaugeValue, now, time.Time{}, cs.labels)
		if !cs.started.IsZero() {
			emit(cadvisorStart, prometheus.GaugeValue, float64(cs.started.UnixNano())/1e9, time.Time{}, cs.labels)
		}
		if cpu := cs.cpu; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
			emit(cadvisorCPU, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9, cpu.Time.Time, cs.labels, "total")
		}
		if mem := cs.memory; mem != nil {
			for d, v := range map[*prometheus.Desc]*uint64{cadvisorMemUsage: mem.UsageBytes, cadvisorWorkingSet: mem.WorkingSetBytes, cadvisorRSS: mem.RSSBytes} {
				if v != nil {
					emit(d, prometheus.GaugeValue, float64(*v), mem.Time.Time, cs.labels)
				}
			}
		}
		if cs.network != nil {
			ifaces := append([]*runtimeapi.NetworkInterfaceUsage{cs.network.DefaultInterface}, cs.network.Interfaces...)
			seen := map[string]bool{}
			for _, iface := range ifaces {
				if iface == nil || iface.Name == "" || seen[iface.Name] {
					continue
				}
				seen[iface.Name] = true
				for d, v := range map[*prometheus.Desc]*runtimeapi.UInt64Value{cadvisorRxBytes: iface.RxBytes, cadvisorRxErrors: iface.RxErrors,
					cadvisorTxBytes: iface.TxBytes, cadvisorTxErrors: iface.TxErrors} {
					if v != nil {
						emit(d, prometheus.CounterValue, float64(v.Value), time.Unix(0, cs.network.Timestamp), cs.labels, iface.Name)
					}
				}
			}
		}
	}
	machine := machineIDs()
	ch <- prometheus.MustNewConstMetric(machineCores, prometheus.GaugeValue, float64(runtime.NumCPU()), machine...)
	if mem, ok := readMeminfo(); ok {
		ch <- prometheus.MustNewConstMetric(machineMemory, prometheus.GaugeValue, float64(mem["MemTotal"]), machine...)
	}
}

// cgroupSeries gathers the machine's, the running pods' and their running containers'
// figures. A container's id is its cgroup, the pod's cgroup and the container's ID, as
// containerd names it under the cgroupfs driver; its name is the runtime's ID.
func (s *Server) cgroupSeries(ctx context.Context) ([]cgroupSeries, error) {
	out := []cgroupSeries{rootSeries()}
	sandboxes, containers, statsByID, err := s.runningWithStats(ctx)
	if err != nil {
		return out, err
	}
	// Network is the sandbox's; a runtime without pod sandbox stats reports none.
	network := map[string]*runtimeapi.NetworkUsage{}
	if sbStats, err := s.runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{}); err == nil {
		for _, st := range sbStats {
			if n := st.GetLinux().GetNetwork(); n != nil {
				network[st.GetAttributes().GetId()] = n
			}
		}
	}
	podsByUID := map[string]*v1.Pod{}
	for _, p := range s.opts.Pods() {
		podsByUID[string(p.UID)] = p
	}
	pods := map[string]*cgroupSeries{}
	cgroups := map[string]string{}
	var order []string
	for _, sb := range sandboxes {
		md := sb.GetMetadata()
		cgroup := ""
		if p := podsByUID[md.GetUid()]; p != nil && s.opts.PodCgroup != nil {
			cgroup = s.opts.PodCgroup(p)
		}
		cgroups[sb.Id] = cgroup
		pods[sb.Id] = &cgroupSeries{labels: []string{"", cgroup, "", "", md.GetNamespace(), md.GetName()},
			started: time.Unix(0, sb.CreatedAt), network: network[sb.Id]}
		order = append(order, sb.Id)
	}
	for _, ctr := range containers {
		pod := pods[ctr.PodSandboxId]
		if pod == nil {
			continue
		}
		id := ""
		if cg := cgroups[ctr.PodSandboxId]; cg != "" {
			id = cg + "/" + ctr.Id
		}
		cs := cgroupSeries{labels: []string{ctr.GetMetadata().GetName(), id, ctr.GetImage().GetImage(), ctr.Id, pod.labels[4], pod.labels[5]},
			started: time.Unix(0, ctr.CreatedAt)}
		if st := statsByID[ctr.Id]; st != nil {
			cs.cpu, cs.memory = cpuStats(st.Cpu), memoryStats(st.Memory)
			// The pod's cgroup holds its containers': their sum, as /stats/summary's.
			pod.cpu, pod.memory = addCPU(pod.cpu, cpuStats(st.Cpu)), addMemory(pod.memory, memoryStats(st.Memory))
		}
		out = append(out, cs)
	}
	for _, id := range order {
		out = append(out, *pods[id])
	}
	return out, nil
}

// rootSeries is the machine's root cgroup, id "/", from /proc.
func rootSeries() cgroupSeries {
	now := time.Now()
	root := cgroupSeries{labels: []string{"", "/", "", "", "", ""}, started: bootTime(), memory: nodeMemory(now)}
	if used, ok := readCPUNanos(); ok {
		root.cpu = &CPUStats{Time: SampleTime{now}, UsageCoreNanoSeconds: &used}
	}
	return root
}

// machineIDs are the values of machineLabels: the boot's, the installation's and the
// hardware's identities, empty where unreadable.
func machineIDs() []string {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return []string{read("/proc/sys/kernel/random/boot_id"), read("/etc/machine-id"), read("/sys/class/dmi/id/product_uuid")}
}
