package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"mizzen/internal/kubelet/containerd"
)

// unconverged lists what does not yet match between what the cluster was asked for and
// what it shows: nodes, Deployments and their pods, EndpointSlices, and the proxy's
// rules. Empty means converged.
func (fc *faultCluster) unconverged(ctx context.Context) []string {
	client := fc.client
	var out []string
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{fmt.Sprintf("listing nodes: %v", err)}
	}
	for _, n := range nodes.Items {
		ready := false
		for _, c := range n.Status.Conditions {
			ready = ready || (c.Type == v1.NodeReady && c.Status == v1.ConditionTrue)
		}
		if !ready {
			out = append(out, fmt.Sprintf("node %s is not Ready", n.Name))
		}
	}
	pods, err := client.CoreV1().Pods(faultNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, fmt.Sprintf("listing pods: %v", err))
	}
	for _, d := range faultDeployments {
		dep, err := client.AppsV1().Deployments(faultNS).Get(ctx, d.name, metav1.GetOptions{})
		if err != nil {
			out = append(out, fmt.Sprintf("deployment %s: %v", d.name, err))
			continue
		}
		want := *dep.Spec.Replicas
		st := dep.Status
		if st.ObservedGeneration < dep.Generation || st.Replicas != want || st.UpdatedReplicas != want || st.ReadyReplicas != want || st.AvailableReplicas != want {
			out = append(out, fmt.Sprintf("deployment %s wants %d replicas: status has generation %d/%d, %d replicas, %d updated, %d ready, %d available",
				d.name, want, st.ObservedGeneration, dep.Generation, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas))
		}
		var live, readyPods int32
		for _, p := range pods.Items {
			if p.Labels["app"] != d.name {
				continue
			}
			switch {
			case p.DeletionTimestamp != nil:
				out = append(out, fmt.Sprintf("pod %s is still terminating", p.Name))
			case p.Spec.NodeName == "":
				out = append(out, fmt.Sprintf("pod %s is not bound", p.Name))
				live++
			default:
				live++
				if podReady(&p) {
					readyPods++
				}
			}
		}
		if live != want || readyPods != want {
			out = append(out, fmt.Sprintf("deployment %s wants %d replicas: %d pods, %d of them Ready", d.name, want, live, readyPods))
		}
	}
	svcs, err := client.CoreV1().Services(faultNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, fmt.Sprintf("listing services: %v", err))
	}
	slices, err := client.DiscoveryV1().EndpointSlices(faultNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, fmt.Sprintf("listing endpointslices: %v", err))
	}
	out = append(out, slicesMismatch(svcs.Items, slices.Items, pods.Items)...)
	out = append(out, fc.sandboxesMismatch(ctx, pods.Items)...)
	// The proxy's rules against every Service of the cluster (the kubernetes Service
	// lives in another namespace).
	all, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, fmt.Sprintf("listing services: %v", err))
	}
	allSlices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return append(out, fmt.Sprintf("listing endpointslices: %v", err))
	}
	return append(out, rulesMismatch(fc.proxyTable(), all.Items, allSlices.Items)...)
}

// rulesSummary is the proxy's view for a log line: each ClusterIP port and its targets.
func (fc *faultCluster) rulesSummary() string {
	rules, err := readProxyTable(fc.proxyTable())
	if err != nil {
		return err.Error()
	}
	var lines []string
	for k, v := range rules {
		lines = append(lines, k+" -> "+v)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// sandboxesMismatch compares the pods running in the node's containerd with the pods
// the API binds to the node: a kubelet back from a fault stops what was deleted while
// it was away, and runs what was created.
func (fc *faultCluster) sandboxesMismatch(ctx context.Context, pods []v1.Pod) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(containerd.Options{DataDir: fc.dir.Containerd()}.Endpoint()).
		WithConnectionTimeout(5 * time.Second).Build(ctx)
	if err != nil {
		return []string{fmt.Sprintf("connecting to the node's containerd: %v", err)}
	}
	defer rs.Close(ctx)
	sandboxes, err := rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return []string{fmt.Sprintf("listing the node's pod sandboxes: %v", err)}
	}
	running := map[string]int{}
	for _, sb := range sandboxes {
		running[sb.Metadata.Namespace+"/"+sb.Metadata.Name]++
	}
	want := map[string]bool{}
	for _, p := range pods {
		if p.Spec.NodeName == faultNode {
			want[p.Namespace+"/"+p.Name] = true
		}
	}
	var out []string
	for name, n := range running {
		if !want[name] {
			out = append(out, fmt.Sprintf("pod %s runs on the node but is not bound to it", name))
		} else if n > 1 {
			out = append(out, fmt.Sprintf("pod %s runs %d sandboxes on the node", name, n))
		}
	}
	for name := range want {
		if running[name] == 0 {
			out = append(out, fmt.Sprintf("pod %s is bound to the node but runs no sandbox there", name))
		}
	}
	sort.Strings(out)
	return out
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// slicesMismatch compares each selector Service's ready endpoints with its Ready pods.
func slicesMismatch(svcs []v1.Service, slices []discoveryv1.EndpointSlice, pods []v1.Pod) []string {
	var out []string
	for _, svc := range svcs {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		want := map[string]bool{}
		for _, p := range pods {
			if sel.Matches(labels.Set(p.Labels)) && p.DeletionTimestamp == nil && podReady(&p) && p.Status.PodIP != "" {
				want[p.Status.PodIP] = true
			}
		}
		have := map[string]bool{}
		for _, s := range slices {
			if s.Labels[discoveryv1.LabelServiceName] != svc.Name {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					have[ep.Addresses[0]] = true
				}
			}
		}
		if w, h := setString(want), setString(have); w != h {
			out = append(out, fmt.Sprintf("service %s: ready endpoints [%s], Ready pods [%s]", svc.Name, h, w))
		}
	}
	return out
}

func setString(m map[string]bool) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// rulesMismatch compares the proxy's table with the Services and EndpointSlices: each
// ClusterIP port must send traffic to exactly the endpoints the slices call ready (or,
// when none is, those still serving while they terminate), and nothing else may have
// an entry in the service-ips map.
func rulesMismatch(table string, svcs []v1.Service, slices []discoveryv1.EndpointSlice) []string {
	rules, err := readProxyTable(table)
	if err != nil {
		return []string{err.Error()}
	}
	want := map[string]string{} // "IP . proto . port" -> sorted endpoints
	for _, svc := range svcs {
		if svc.Spec.Type == v1.ServiceTypeExternalName || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		for _, port := range svc.Spec.Ports {
			proto := strings.ToLower(string(port.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			var ready, terminating []string
			for _, s := range slices {
				if s.Labels[discoveryv1.LabelServiceName] != svc.Name || s.Namespace != svc.Namespace || s.AddressType != discoveryv1.AddressTypeIPv4 {
					continue
				}
				var epPort int32 = -1
				for _, p := range s.Ports {
					if p.Name != nil && *p.Name == port.Name && p.Port != nil && (p.Protocol == nil || *p.Protocol == port.Protocol || (port.Protocol == "" && *p.Protocol == v1.ProtocolTCP)) {
						epPort = *p.Port
					}
				}
				if epPort < 0 {
					continue
				}
				for _, ep := range s.Endpoints {
					c := ep.Conditions
					addr := fmt.Sprintf("%s:%d", ep.Addresses[0], epPort)
					if c.Ready == nil || *c.Ready {
						ready = append(ready, addr)
					} else if (c.Serving != nil && *c.Serving) && (c.Terminating != nil && *c.Terminating) {
						terminating = append(terminating, addr)
					}
				}
			}
			if len(ready) == 0 {
				ready = terminating
			}
			if len(ready) > 0 {
				sort.Strings(ready)
				want[fmt.Sprintf("%s . %s . %d", svc.Spec.ClusterIP, proto, port.Port)] = strings.Join(dedup(ready), " ")
			}
		}
	}
	var out []string
	for key, eps := range want {
		if got, ok := rules[key]; !ok {
			out = append(out, fmt.Sprintf("proxy rules: no entry for %s (endpoints %s)", key, eps))
		} else if got != eps {
			out = append(out, fmt.Sprintf("proxy rules: %s goes to [%s], the slices' endpoints are [%s]", key, got, eps))
		}
	}
	for key, got := range rules {
		if _, ok := want[key]; !ok {
			out = append(out, fmt.Sprintf("proxy rules: %s goes to [%s] but no Service port has endpoints there", key, got))
		}
	}
	sort.Strings(out)
	return out
}

func dedup(sorted []string) []string {
	var out []string
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// readProxyTable reads the proxy's table with `nft -j` and follows each element of
// its service-ips map (ClusterIP . protocol . port) through the chains it jumps to, to
// the DNAT targets at their end: "IP . proto . port" -> sorted "addr:port" list.
func readProxyTable(table string) (map[string]string, error) {
	raw, err := exec.Command("nft", "-j", "list", "table", "ip", table).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nft list table ip %s: %v: %s", table, err, raw)
	}
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("nft -j: %v", err)
	}
	targets := map[string][]string{} // chain -> chains it jumps or goes to
	dnats := map[string][]string{}   // chain -> its DNAT targets
	var serviceIPs []any
	for _, obj := range doc.Nftables {
		if m, ok := obj["map"]; ok {
			var mp struct {
				Name string `json:"name"`
				Elem []any  `json:"elem"`
			}
			if err := json.Unmarshal(m, &mp); err != nil {
				return nil, err
			}
			if mp.Name == "service-ips" {
				serviceIPs = mp.Elem
			}
		}
		if r, ok := obj["rule"]; ok {
			var rule struct {
				Chain string `json:"chain"`
				Expr  any    `json:"expr"`
			}
			if err := json.Unmarshal(r, &rule); err != nil {
				return nil, err
			}
			walkJSON(rule.Expr, func(key string, v any) {
				switch key {
				case "goto", "jump":
					if t, ok := v.(map[string]any)["target"].(string); ok {
						targets[rule.Chain] = append(targets[rule.Chain], t)
					}
				case "dnat":
					d, _ := v.(map[string]any)
					dnats[rule.Chain] = append(dnats[rule.Chain], fmt.Sprintf("%v:%v", d["addr"], d["port"]))
				}
			})
		}
	}
	out := map[string]string{}
	for _, e := range serviceIPs {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("service-ips: unexpected element %v", e)
		}
		concat, _ := pair[0].(map[string]any)["concat"].([]any)
		var parts []string
		for _, p := range concat {
			parts = append(parts, fmt.Sprint(p))
		}
		var start []string
		walkJSON(pair[1], func(key string, v any) {
			if key == "goto" || key == "jump" {
				if t, ok := v.(map[string]any)["target"].(string); ok {
					start = append(start, t)
				}
			}
		})
		seen := map[string]bool{}
		var eps []string
		var visit func(chain string)
		visit = func(chain string) {
			if seen[chain] {
				return
			}
			seen[chain] = true
			eps = append(eps, dnats[chain]...)
			for _, t := range targets[chain] {
				visit(t)
			}
		}
		for _, c := range start {
			visit(c)
		}
		sort.Strings(eps)
		out[strings.Join(parts, " . ")] = strings.Join(dedup(eps), " ")
	}
	return out, nil
}

// walkJSON calls f with every key and value of every object inside v.
func walkJSON(v any, f func(key string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			f(k, val)
			walkJSON(val, f)
		}
	case []any:
		for _, val := range x {
			walkJSON(val, f)
		}
	}
}

// faultViolations are the invariants the whole run must keep: no acknowledged write
// lost, no ReplicaSet over what its Deployment allows, no pod bound twice, no container
// restarted.
func faultViolations(ctx context.Context, client kubernetes.Interface, rec *faultRecord) []string {
	var out []string
	lost, err := rec.lostWrites(ctx, client)
	if err != nil {
		out = append(out, fmt.Sprintf("reading the writer's ConfigMaps: %v", err))
	}
	out = append(out, lost...)
	out = append(out, rec.overReplicated()...)
	out = append(out, rec.rebound()...)
	// No container dies of a fault in another component: a kubelet or containerd that
	// restarts finds its containers running, as upstream's does. One that was being
	// started when both were killed never ran: its start fails once (containerd kept
	// half of it: "task already exists") and the next attempt counts as a restart, as
	// upstream's kubelet counts it. That one is not a container that died.
	neverRan := func(c v1.ContainerStatus) bool {
		t := c.LastTerminationState.Terminated
		// The runtime's start time of a container that never started is 0: the kubelet
		// reports it as 1970-01-01, as upstream's does.
		return c.RestartCount == 1 && t != nil && (t.StartedAt.IsZero() || t.StartedAt.Unix() == 0)
	}
	pods, err := client.CoreV1().Pods(faultNS).List(ctx, metav1.ListOptions{LabelSelector: "app"})
	if err != nil {
		return append(out, fmt.Sprintf("listing pods: %v", err))
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.RestartCount > 0 && !neverRan(c) {
				out = append(out, fmt.Sprintf("pod %s on %s: container %s restarted %d times (last state %+v)", p.Name, p.Spec.NodeName, c.Name, c.RestartCount, c.LastTerminationState))
			}
		}
	}
	return out
}
