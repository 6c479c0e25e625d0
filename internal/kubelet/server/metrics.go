package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// metricsHandler serves /metrics: the Go runtime and process collectors and, read from
// the runtime at each scrape, the pod and container counts under upstream's kubelet
// metric names.
func (s *Server) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&runtimeCollector{s: s})
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

var (
	nodeNameDesc = prometheus.NewDesc("kubelet_node_name", "The node's name. The count is always 1.", []string{"node"}, nil)
	runningPods  = prometheus.NewDesc("kubelet_running_pods", "Number of pods that have a running pod sandbox", nil, nil)
	containers   = prometheus.NewDesc("kubelet_running_containers", "Number of containers currently running", []string{"container_state"}, nil)
)

// runtimeCollector counts the runtime's sandboxes and containers when scraped.
type runtimeCollector struct{ s *Server }

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodeNameDesc
	ch <- runningPods
	ch <- containers
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(nodeNameDesc, prometheus.GaugeValue, 1, c.s.opts.NodeName)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ready := runtimeapi.PodSandboxState_SANDBOX_READY
	if sandboxes, err := c.s.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: ready}}); err == nil {
		ch <- prometheus.MustNewConstMetric(runningPods, prometheus.GaugeValue, float64(len(sandboxes)))
	} else {
		ch <- prometheus.NewInvalidMetric(runningPods, err)
	}
	list, err := c.s.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(containers, err)
		return
	}
	byState := map[string]float64{"created": 0, "running": 0, "exited": 0, "unknown": 0}
	for _, ctr := range list {
		// CONTAINER_RUNNING is "running", as upstream labels the states.
		byState[strings.ToLower(strings.TrimPrefix(ctr.GetState().String(), "CONTAINER_"))]++
	}
	for state, n := range byState {
		ch <- prometheus.MustNewConstMetric(containers, prometheus.GaugeValue, n, state)
	}
}
