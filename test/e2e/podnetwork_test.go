package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPodNetworkAcrossNodes runs three nodes on three machines with the vxlan pod
// network and checks, as a user would: pods reach pods on other nodes by IP with their
// own source address, a Service spreads over the three nodes from each node, DNS
// answers on every node, and NodePorts answer on every node (keeping the client's
// address under externalTrafficPolicy Local).
func TestPodNetworkAcrossNodes(t *testing.T) {
	sideBySide(t)
	mn := startMultiNode(t, "vxlan")
	ctx := context.Background()
	c := mn.server

	t.Run("nodes report the pod network", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			nodes, err := mn.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			for _, n := range nodes.Items {
				cond := findNodeCondition(&n, v1.NodeNetworkUnavailable)
				if cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != "PodNetworkReady" {
					return fmt.Errorf("node %s: NetworkUnavailable %+v", n.Name, cond)
				}
				if n.Annotations["podnet.mizzen.io/vtep-mac"] == "" {
					return fmt.Errorf("node %s publishes no VTEP MAC: %v", n.Name, n.Annotations)
				}
			}
			return nil
		})
	})

	// A netexec server and a busybox client on every node.
	for i, node := range mn.nodes {
		for _, p := range []*v1.Pod{
			podOn(fmt.Sprintf("web-%d", i), node, map[string]string{"app": "web", "node": fmt.Sprint(i)}, true),
			podOn(fmt.Sprintf("client-%d", i), node, map[string]string{"role": "client", "node": fmt.Sprint(i)}, false),
		} {
			if _, err := mn.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	webIPs, clientIPs := map[int]string{}, map[int]string{}
	for i := range mn.nodes {
		webIPs[i] = c.waitPod("default", fmt.Sprintf("web-%d", i), 180*time.Second, runningAndReady).Status.PodIP
		clientIPs[i] = c.waitPod("default", fmt.Sprintf("client-%d", i), 180*time.Second, runningAndReady).Status.PodIP
	}
	t.Logf("web pods %v, clients %v", webIPs, clientIPs)

	fromPod := func(pod, url string) (string, error) {
		out, err := c.kubectlErr("exec", pod, "--", "timeout", "5", "wget", "-qO-", url)
		return strings.TrimSpace(out), err
	}

	t.Run("pod to pod across nodes by IP", func(t *testing.T) {
		for from := range mn.nodes {
			for to := range mn.nodes {
				eventually(t, 30*time.Second, func() error {
					got, err := fromPod(fmt.Sprintf("client-%d", from), "http://"+webIPs[to]+":8080/hostname")
					if err != nil || got != fmt.Sprintf("web-%d", to) {
						return fmt.Errorf("client-%d to web-%d (%s): %q %v", from, to, webIPs[to], got, err)
					}
					return nil
				})
				// Pod-to-pod traffic is not masqueraded: the server sees the client pod.
				got, err := fromPod(fmt.Sprintf("client-%d", from), "http://"+webIPs[to]+":8080/clientip")
				if err != nil || !strings.HasPrefix(got, clientIPs[from]+":") {
					t.Errorf("client-%d to web-%d: the server saw %q (%v), want the client pod's %s", from, to, got, err, clientIPs[from])
				}
			}
		}
	})

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"},
		Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	local := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-local"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeNodePort, Selector: map[string]string{"app": "web"}, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
		Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	for _, s := range []*v1.Service{svc, local} {
		created, err := mn.client.CoreV1().Services("default").Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		*s = *created
	}

	t.Run("a ClusterIP spreads over the three nodes from every node", func(t *testing.T) {
		for from := range mn.nodes {
			seen := map[string]bool{}
			eventually(t, 60*time.Second, func() error {
				got, err := fromPod(fmt.Sprintf("client-%d", from), "http://"+svc.Spec.ClusterIP+"/hostname")
				if err != nil {
					return fmt.Errorf("client-%d to %s: %v %s", from, svc.Spec.ClusterIP, err, got)
				}
				seen[got] = true
				if len(seen) < len(mn.nodes) {
					return fmt.Errorf("client-%d reached only %v", from, seen)
				}
				return nil
			})
		}
	})

	t.Run("DNS from every node", func(t *testing.T) {
		for from := range mn.nodes {
			eventually(t, 30*time.Second, func() error {
				out, err := c.kubectlErr("exec", fmt.Sprintf("client-%d", from), "--", "nslookup", "web.default.svc.cluster.local")
				if err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
					return fmt.Errorf("nslookup on client-%d: %v %s", from, err, out)
				}
				return nil
			})
		}
	})

	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) (string, error) {
		resp, err := hc.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b)), err
	}

	t.Run("a NodePort answers on every node", func(t *testing.T) {
		for _, m := range mn.lab.Machines {
			url := fmt.Sprintf("http://%s:%d/hostname", m.Addr, svc.Spec.Ports[0].NodePort)
			eventually(t, 30*time.Second, func() error {
				got, err := get(url)
				if err != nil || !strings.HasPrefix(got, "web-") {
					return fmt.Errorf("%s: %q %v", url, got, err)
				}
				return nil
			})
		}
	})

	t.Run("NetworkPolicy matrix", func(t *testing.T) { checkPolicies(t, mn, webIPs) })

	t.Run("externalTrafficPolicy Local keeps the client's address", func(t *testing.T) {
		for i, m := range mn.lab.Machines {
			url := fmt.Sprintf("http://%s:%d/clientip", m.Addr, local.Spec.Ports[0].NodePort)
			eventually(t, 30*time.Second, func() error {
				got, err := get(url)
				if err != nil || !strings.HasPrefix(got, mn.lab.Gateway.String()+":") {
					return fmt.Errorf("%s (node %d): %q %v, want the host's %s", url, i, got, err, mn.lab.Gateway)
				}
				return nil
			})
			// The node's own endpoint answers: the one on its machine.
			got, err := get(fmt.Sprintf("http://%s:%d/hostname", m.Addr, local.Spec.Ports[0].NodePort))
			if err != nil || got != fmt.Sprintf("web-%d", i) {
				t.Errorf("node %d's Local NodePort answered %q (%v), want web-%d", i, got, err, i)
			}
		}
	})
}

// checkPolicies runs a NetworkPolicy matrix on the cluster of TestPodNetworkAcrossNodes:
// allowed pairs connect, denied pairs time out, on every node.
func checkPolicies(t *testing.T, mn *multiNode, webIPs map[int]string) {
	ctx := context.Background()
	c := mn.server
	// Another namespace, with a pod the policy trusts and one it does not.
	if _, err := mn.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other",
		Labels: map[string]string{"team": "other"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1.Pod{
		podOn("trusted", mn.nodes[1], map[string]string{"role": "trusted"}, false),
		podOn("outsider", mn.nodes[2], map[string]string{"role": "client"}, false),
	} {
		if _, err := mn.client.CoreV1().Pods("other").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitPod("other", "trusted", 120*time.Second, runningAndReady)
	c.waitPod("other", "outsider", 120*time.Second, runningAndReady)

	// connects tells whether pod (ns/name) reaches url within 3 s.
	connects := func(ns, pod, url string) bool {
		out, err := c.kubectlErr("exec", "-n", ns, pod, "--", "timeout", "3", "wget", "-qO-", url)
		return err == nil && strings.HasPrefix(strings.TrimSpace(out), "web-")
	}
	type pair struct {
		ns, pod string
		web     int
		allowed bool
	}
	// expect polls until every pair behaves as expected: a policy takes effect on
	// every node shortly after it is created.
	expect := func(what string, pairs []pair) {
		t.Helper()
		eventually(t, 60*time.Second, func() error {
			var wrong []string
			for _, p := range pairs {
				url := "http://" + webIPs[p.web] + ":8080/hostname"
				if got := connects(p.ns, p.pod, url); got != p.allowed {
					wrong = append(wrong, fmt.Sprintf("%s/%s to web-%d: connected %v, want %v", p.ns, p.pod, p.web, got, p.allowed))
				}
			}
			if len(wrong) > 0 {
				return fmt.Errorf("%s: %s", what, strings.Join(wrong, "; "))
			}
			return nil
		})
	}

	tcp := v1.ProtocolTCP
	http := intstr.FromString("http")
	ingress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "web-ingress"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}},
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}},
					PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "trusted"}}},
			},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &http}},
		}},
	}}
	if _, err := mn.client.NetworkingV1().NetworkPolicies("default").Create(ctx, ingress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pairs []pair
	for web := range mn.nodes {
		for from := range mn.nodes {
			pairs = append(pairs, pair{"default", fmt.Sprintf("client-%d", from), web, true})
		}
		pairs = append(pairs, pair{"other", "trusted", web, true}, pair{"other", "outsider", web, false})
	}
	expect("ingress: clients of the namespace and the trusted pod of the other namespace on the named port", pairs)

	// Egress of client-0: only to the cluster CIDR without web-2's address, ports 8000-8100.
	from, end := intstr.FromInt32(8000), int32(8100)
	egress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "client-0-egress"}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "client", "node": "0"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: mnClusterCIDR, Except: []string{webIPs[2] + "/32"}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &from, EndPort: &end}},
		}},
	}}
	if _, err := mn.client.NetworkingV1().NetworkPolicies("default").Create(ctx, egress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("egress: ipBlock with except and a port range", []pair{
		{"default", "client-0", 0, true}, {"default", "client-0", 1, true}, {"default", "client-0", 2, false},
		{"default", "client-1", 2, true},
	})

	// Deleting the policies opens everything again.
	for _, name := range []string{"web-ingress", "client-0-egress"} {
		if err := mn.client.NetworkingV1().NetworkPolicies("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expect("no policy", []pair{{"other", "outsider", 0, true}, {"default", "client-0", 2, true}})
}

func findNodeCondition(n *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// TestPodNetworkHostGW runs the three machines with --pod-network host-gw (they share
// one L2 segment): pods on every node reach a pod on every other node by IP.
func TestPodNetworkHostGW(t *testing.T) {
	mn := startMultiNode(t, "host-gw")
	ctx := context.Background()
	c := mn.server
	for i, node := range mn.nodes {
		if _, err := mn.client.CoreV1().Pods("default").Create(ctx, podOn(fmt.Sprintf("web-%d", i), node, nil, true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	webIPs := map[int]string{}
	for i := range mn.nodes {
		webIPs[i] = c.waitPod("default", fmt.Sprintf("web-%d", i), 180*time.Second, runningAndReady).Status.PodIP
	}
	eventually(t, 30*time.Second, func() error {
		nodes, err := mn.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			cond := findNodeCondition(&n, v1.NodeNetworkUnavailable)
			if cond == nil || cond.Status != v1.ConditionFalse || !strings.Contains(cond.Message, "host-gw") {
				return fmt.Errorf("node %s: NetworkUnavailable %+v", n.Name, cond)
			}
			if n.Annotations["podnet.mizzen.io/vtep-mac"] != "" {
				return fmt.Errorf("node %s publishes a VTEP under host-gw", n.Name)
			}
		}
		return nil
	})
	// netexec's /dial (reached through the apiserver's pod proxy) makes web-i connect
	// to web-j: pod to pod, every pair.
	for from := range mn.nodes {
		for to := range mn.nodes {
			eventually(t, 30*time.Second, func() error {
				path := fmt.Sprintf("/api/v1/namespaces/default/pods/web-%d:8080/proxy/dial?request=hostname&protocol=http&host=%s&port=8080&tries=1", from, webIPs[to])
				out, err := c.kubectlErr("get", "--raw", path)
				if err != nil || !strings.Contains(out, fmt.Sprintf("web-%d", to)) {
					return fmt.Errorf("web-%d to web-%d: %v %s", from, to, err, out)
				}
				return nil
			})
		}
	}
}
