// Command podnet benchmarks the pod network across nodes: TCP throughput from a pod to
// a pod on its own node against a pod on another node (through the vxlan overlay, or
// host-gw routes), and the time from a NetworkPolicy's create (and delete) to its
// enforcement as a client sees it. Two machines (network namespaces on one bridge, as
// the e2e tests make them) run a real `mizzen server` and a real `mizzen agent`, each
// with its own containerd.
//
//	go build -o _output/bin/mizzen ./cmd/mizzen && go build -o _output/bin/mizzen-pause ./internal/kubelet/containerd/pause && go run ./bench/podnet
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"
	"mizzen/internal/kubelet/containerd"
	"mizzen/internal/testing/netlab"
	"mizzen/internal/testing/proc"
)

// The bench's networks, apart from every other cluster on this host.
const (
	labPrefix   = "mznpb"
	labSubnet   = "10.250.150.0/24"
	clusterCIDR = "10.149.0.0/16"
	serviceCIDR = "10.67.0.0/16"
	bridge      = "mznp3"
)

func main() {
	bin := flag.String("mizzen", "_output/bin/mizzen", "path of the mizzen binary (mizzen-pause beside it)")
	images := flag.String("images", "_output/images", "directory of agnhost.tar and busybox.tar (make images)")
	mode := flag.String("pod-network", "vxlan", "the pod network: vxlan or host-gw")
	rounds := flag.Int("rounds", 3, "throughput rounds, alternating same node and across nodes; policy rounds")
	mib := flag.Int("mib", 256, "MiB sent per throughput round")
	flag.Parse()
	if err := run(*bin, *images, *mode, *rounds, *mib); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type machineProc struct {
	dir     string
	machine *netlab.Machine
	cmd     *exec.Cmd
	log     bytes.Buffer
}

func run(bin, images, mode string, rounds, mib int) error {
	bin, _ = filepath.Abs(bin)
	images, _ = filepath.Abs(images)
	lab, err := netlab.New(labPrefix, labSubnet, 2)
	if err != nil {
		return err
	}
	defer lab.Close()
	nodes := make([]*machineProc, 2)
	for i := range nodes {
		dir, err := os.MkdirTemp("", "mizzen-bench-podnet-")
		if err != nil {
			return err
		}
		nodes[i] = &machineProc{dir: dir, machine: lab.Machines[i]}
		imgDir := datadir.Dir(dir).Images()
		if err := os.MkdirAll(imgDir, 0o755); err != nil {
			return err
		}
		for _, name := range []string{"agnhost.tar", "busybox.tar"} {
			if err := os.Symlink(filepath.Join(images, name), filepath.Join(imgDir, name)); err != nil {
				return err
			}
		}
	}
	defer func() {
		for _, n := range nodes {
			_ = containerd.RemoveAllPods(context.Background(), containerd.Options{DataDir: datadir.Dir(n.dir).Containerd()})
			proc.Stop(n.cmd, 30*time.Second)
		}
		for _, n := range nodes {
			_, _ = n.machine.Run(context.Background(), bin, "uninstall", "--data-dir", n.dir, "--pod-bridge", bridge, "--grace-period", "5s")
		}
	}()
	const port = 6444
	srv := nodes[0]
	srv.cmd = srv.machine.Command(context.Background(), bin, "server", "--data-dir", srv.dir, "--bind-address", "0.0.0.0",
		"--secure-port", strconv.Itoa(port), "--cluster-cidr", clusterCIDR, "--service-cluster-ip-range", serviceCIDR,
		"--pod-bridge", bridge, "--pod-network", mode, "--kubelet-port", "10350",
		"--disable", "ingress,dashboard,metrics-server", "--controller-manager-secure-port", "0", "--scheduler-secure-port", "0", "--etcd-disable-snapshots")
	srv.cmd.Stdout, srv.cmd.Stderr = &srv.log, &srv.log
	if err := srv.cmd.Start(); err != nil {
		return err
	}
	url := fmt.Sprintf("https://%s:%d", srv.machine.Addr, port)
	kubeconfig := filepath.Join(srv.dir, "bench.kubeconfig")
	if err := waitFor(60*time.Second, func() error { return rewriteKubeconfig(filepath.Join(srv.dir, "admin.kubeconfig"), kubeconfig, url) }); err != nil {
		return fmt.Errorf("server: %w\n%s", err, srv.log.String())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ag := nodes[1]
	ag.cmd = ag.machine.Command(context.Background(), bin, "agent", "--kubeconfig", kubeconfig, "--data-dir", ag.dir,
		"--node-name", "mznpb-node", "--pod-bridge", bridge, "--cluster-cidr", clusterCIDR, "--kubelet-port", "10350", "--pod-network", mode)
	ag.cmd.Stdout, ag.cmd.Stderr = &ag.log, &ag.log
	if err := ag.cmd.Start(); err != nil {
		return err
	}
	ctx := context.Background()
	var names []string
	if err := waitFor(180*time.Second, func() error {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		names = names[:0]
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue && n.Spec.PodCIDR != "" && len(n.Status.Images) >= 3 {
					names = append(names, n.Name)
				}
			}
		}
		if len(names) < 2 {
			return fmt.Errorf("ready nodes %v", names)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("%w\nserver:\n%s\nagent:\n%s", err, srv.log.String(), ag.log.String())
	}
	nodeOf := func(m *machineProc) string {
		if m == ag {
			return "mznpb-node"
		}
		for _, n := range names {
			if n != "mznpb-node" {
				return n
			}
		}
		return ""
	}
	one := int64(1)
	sink := func(name, node string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}}, Spec: v1.PodSpec{NodeName: node,
			TerminationGracePeriodSeconds: &one, Containers: []v1.Container{{Name: "main", Image: "mizzen.local/agnhost:v1",
				Args: []string{"netexec", "--http-port=8080"}}}}}
	}
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}}, Spec: v1.PodSpec{NodeName: nodeOf(ag),
		TerminationGracePeriodSeconds: &one, Containers: []v1.Container{{Name: "main", Image: "mizzen.local/agnhost:v1",
			Args: []string{"netexec", "--http-port=8080"}}}}}
	client0 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}, Spec: v1.PodSpec{NodeName: nodeOf(srv),
		TerminationGracePeriodSeconds: &one, Containers: []v1.Container{{Name: "main", Image: "mizzen.local/busybox:v1", Command: []string{"sleep", "3600"}}}}}
	podIPs := map[string]string{}
	for _, p := range []*v1.Pod{sink("sink-same", nodeOf(srv)), sink("sink-across", nodeOf(ag)), web, client0} {
		if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	if err := waitFor(180*time.Second, func() error {
		for _, name := range []string{"sink-same", "sink-across", "web", "client"} {
			p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodRunning || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s not running: %v", name, err)
			}
			podIPs[name] = p.Status.PodIP
		}
		return nil
	}); err != nil {
		return err
	}
	fmt.Printf("pod network %s; pods %v\n", mode, podIPs)

	// Throughput: the client pod downloads mib MiB from netexec's /bytes on a pod of its
	// own node and on one of the other node, alternating, timed inside the pod.
	realLine := regexp.MustCompile(`real\s+(\d+)m\s*([0-9.]+)s`)
	for r := 0; r < rounds; r++ {
		for _, target := range []string{"sink-same", "sink-across"} {
			script := fmt.Sprintf("time wget -qO /dev/null 'http://%s:8080/bytes?size=%d'", podIPs[target], mib<<20)
			out, err := exec.Command(bin, "kubectl", "--kubeconfig", kubeconfig, "exec", "client", "--", "sh", "-c", script).CombinedOutput()
			m := realLine.FindStringSubmatch(string(out))
			if err != nil || m == nil {
				return fmt.Errorf("downloading from %s: %v\n%s", target, err, out)
			}
			mins, _ := strconv.ParseFloat(m[1], 64)
			secs, _ := strconv.ParseFloat(m[2], 64)
			secs += 60 * mins
			fmt.Printf("round %d  %-12s %8.1f MiB/s (%d MiB in %.2fs)\n", r+1, target, float64(mib)/secs, mib, secs)
		}
	}

	// Policy enforcement: the host reaches the pods of the agent's node through a route
	// of its own, and dials web every 10 ms while a deny-all ingress policy is created
	// and deleted. A figure is when the first of five dials in a row with the new
	// outcome started; a dial in flight at the change (dropped SYNs fail only at its
	// 100 ms timeout) can make it up to ~110 ms late.
	pod := netip.MustParsePrefix(clusterCIDR)
	route := &netlink.Route{Dst: &net.IPNet{IP: pod.Addr().AsSlice(), Mask: net.CIDRMask(pod.Bits(), 32)}, Gw: ag.machine.Addr.AsSlice()}
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("host route to the pods: %w", err)
	}
	defer netlink.RouteDel(route)
	target := net.JoinHostPort(podIPs["web"], "8080")
	dials := func(want bool, since time.Time, timeout time.Duration) (time.Duration, error) {
		streak := 0
		var first time.Duration
		for time.Since(since) < timeout {
			attempt := time.Since(since) // a dropped SYN fails only at the dial's timeout
			c, err := net.DialTimeout("tcp", target, 100*time.Millisecond)
			if err == nil {
				c.Close()
			}
			if (err == nil) == want {
				if streak == 0 {
					first = attempt
				}
				if streak++; streak == 5 {
					return first, nil
				}
			} else {
				streak = 0
			}
			time.Sleep(10 * time.Millisecond)
		}
		return 0, fmt.Errorf("no steady state after %v", timeout)
	}
	if _, err := dials(true, time.Now(), 30*time.Second); err != nil {
		return fmt.Errorf("the host never reached web: %w", err)
	}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-web"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	for r := 0; r < rounds; r++ {
		start := time.Now()
		if _, err := client.NetworkingV1().NetworkPolicies("default").Create(ctx, deny, metav1.CreateOptions{}); err != nil {
			return err
		}
		enforced, err := dials(false, start, 20*time.Second)
		if err != nil {
			return fmt.Errorf("deny policy: %w", err)
		}
		start = time.Now()
		if err := client.NetworkingV1().NetworkPolicies("default").Delete(ctx, deny.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		lifted, err := dials(true, start, 20*time.Second)
		if err != nil {
			return fmt.Errorf("policy delete: %w", err)
		}
		fmt.Printf("round %d  create -> denied %v   delete -> allowed %v\n", r+1, enforced.Round(time.Millisecond), lifted.Round(time.Millisecond))
	}
	return nil
}

func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func rewriteKubeconfig(from, to, url string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return err
	}
	for _, cl := range cfg.Clusters {
		cl.Server = url
	}
	return clientcmd.WriteToFile(*cfg, to)
}
