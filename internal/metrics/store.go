// Package metrics is mizzen's metrics server: it scrapes every node's kubelet for the
// resource usage of the node and its pods, keeps the last two samples of each, and
// serves the rates and working sets between them as the metrics.k8s.io/v1beta1 API
// (NodeMetrics, PodMetrics) behind the apiserver's aggregation layer, which is what
// `kubectl top` reads.
package metrics

import (
	"slices"
	"strings"
	"sync"
	"time"

	nodeserver "mizzen/internal/kubelet/server"
)

// sample is one reading of a node's or a container's usage: cumulative CPU time and
// the memory working set at a moment.
type sample struct {
	at         time.Time
	cpuNanos   uint64 // cumulative CPU time in core-nanoseconds
	workingSet uint64 // bytes
}

// series keeps the last two samples of one node or container. start tells a restarted
// container (or rebooted node) from the same one: its counters begin again, so the
// older sample no longer counts.
type series struct {
	start      time.Time
	prev, last *sample
}

// add records s, dropping what cannot be compared with it.
func (sr *series) add(start time.Time, s sample) {
	switch {
	case sr.last == nil || !start.Equal(sr.start) || s.cpuNanos < sr.last.cpuNanos:
		sr.prev = nil
	case !s.at.After(sr.last.at):
		// The kubelet answered with the sample already kept.
		return
	default:
		sr.prev = sr.last
	}
	sr.start, sr.last = start, &s
}

// Usage is what the API reports for a node or a container: the CPU rate over a window
// ending at Timestamp, and the working set at Timestamp.
type Usage struct {
	Timestamp  time.Time
	Window     time.Duration
	NanoCores  uint64
	WorkingSet uint64
}

// usage is the rate between the two samples; false until there are two.
func (sr *series) usage() (Usage, bool) {
	if sr == nil || sr.prev == nil || sr.last == nil {
		return Usage{}, false
	}
	window := sr.last.at.Sub(sr.prev.at)
	if window <= 0 {
		return Usage{}, false
	}
	rate := float64(sr.last.cpuNanos-sr.prev.cpuNanos) / window.Seconds()
	return Usage{Timestamp: sr.last.at, Window: window, NanoCores: uint64(rate), WorkingSet: sr.last.workingSet}, true
}

// podKey names a pod.
type podKey struct{ namespace, name string }

// podSeries are a pod's containers by name.
type podSeries map[string]*series

// Store holds the last two samples of every node and container, replaced scrape by
// scrape: what a scrape no longer reports is forgotten. It is safe for concurrent use.
type Store struct {
	mu    sync.RWMutex
	nodes map[string]*series
	pods  map[podKey]podSeries
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{nodes: map[string]*series{}, pods: map[podKey]podSeries{}}
}

// Update records one scrape of every node that answered; nodes absent from summaries,
// and pods and containers none of them reports, are dropped.
func (st *Store) Update(summaries map[string]*nodeserver.Summary) {
	st.mu.Lock()
	defer st.mu.Unlock()
	nodes := map[string]*series{}
	pods := map[podKey]podSeries{}
	for nodeName, sum := range summaries {
		if sum == nil {
			continue
		}
		if s, ok := nodeSample(sum.Node); ok {
			sr := st.nodes[nodeName]
			if sr == nil {
				sr = &series{}
			}
			sr.add(sum.Node.StartTime.Time, s)
			nodes[nodeName] = sr
		}
		for _, p := range sum.Pods {
			key := podKey{p.PodRef.Namespace, p.PodRef.Name}
			old := st.pods[key]
			containers := podSeries{}
			for _, c := range p.Containers {
				s, ok := containerSample(c)
				if !ok {
					continue
				}
				sr := old[c.Name]
				if sr == nil {
					sr = &series{}
				}
				sr.add(c.StartTime.Time, s)
				containers[c.Name] = sr
			}
			pods[key] = containers
		}
	}
	st.nodes, st.pods = nodes, pods
}

func nodeSample(n nodeserver.NodeStats) (sample, bool) {
	if n.CPU == nil || n.CPU.UsageCoreNanoSeconds == nil || n.Memory == nil || n.Memory.WorkingSetBytes == nil {
		return sample{}, false
	}
	return sample{at: n.CPU.Time.Time, cpuNanos: *n.CPU.UsageCoreNanoSeconds, workingSet: *n.Memory.WorkingSetBytes}, true
}

func containerSample(c nodeserver.ContainerStats) (sample, bool) {
	if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil {
		return sample{}, false
	}
	return sample{at: c.CPU.Time.Time, cpuNanos: *c.CPU.UsageCoreNanoSeconds, workingSet: *c.Memory.WorkingSetBytes}, true
}

// Node is a node's usage; false until the node has been scraped twice.
func (st *Store) Node(name string) (Usage, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.nodes[name].usage()
}

// ContainerUsage is one container's usage.
type ContainerUsage struct {
	Name string
	Usage
}

// Pod is the usage of a pod's containers, in name order; false unless every container
// the kubelet reports for it has been sampled twice, as upstream's metrics server
// leaves out a pod it can only partly account for.
func (st *Store) Pod(namespace, name string) ([]ContainerUsage, bool) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	containers, ok := st.pods[podKey{namespace, name}]
	if !ok || len(containers) == 0 {
		return nil, false
	}
	out := make([]ContainerUsage, 0, len(containers))
	for cname, sr := range containers {
		u, ok := sr.usage()
		if !ok {
			return nil, false
		}
		out = append(out, ContainerUsage{Name: cname, Usage: u})
	}
	slices.SortFunc(out, func(a, b ContainerUsage) int { return strings.Compare(a.Name, b.Name) })
	return out, true
}
