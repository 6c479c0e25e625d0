package podnet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/testing/netlab"
)

// TestProgramsMachines runs the component of two nodes on two machines (network
// namespaces on one bridge), each with a bridge holding its pod CIDR's gateway address
// as the CNI plugin makes it, and checks that the machines' pod networks reach each
// other through vxlan, then through host-gw, and that a deleted node's route goes.
func TestProgramsMachines(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	lab, err := netlab.New("mznpu", "10.250.149.0/24", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lab.Close() })
	ctx := context.Background()
	cidrs := []string{"10.149.1.0/24", "10.149.2.0/24"}
	handles := make([]*netlink.Handle, 2)
	var nodes []*v1.Node
	for i, m := range lab.Machines {
		gw := strings.Replace(cidrs[i], ".0/24", ".1/24", 1)
		for _, args := range [][]string{
			{"link", "add", "mznpu0", "type", "bridge"}, {"addr", "add", gw, "dev", "mznpu0"}, {"link", "set", "mznpu0", "up"},
		} {
			if out, err := m.Run(ctx, "ip", args...); err != nil {
				t.Fatal(err, out)
			}
		}
		if _, err := m.Run(ctx, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
			t.Fatal(err)
		}
		ns, err := netns.GetFromName(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Close() })
		if handles[i], err = netlink.NewHandleAt(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(handles[i].Close)
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.Name}, Spec: v1.NodeSpec{PodCIDR: cidrs[i]},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: m.Addr.String()}}}})
	}
	// ping sends one packet from machine from's pod gateway to the other's.
	ping := func(from int) error {
		src := strings.Replace(cidrs[from], ".0/24", ".1", 1)
		dst := strings.Replace(cidrs[1-from], ".0/24", ".1", 1)
		_, err := lab.Machines[from].Run(ctx, "busybox", "ping", "-c1", "-W2", "-I", src, dst)
		return err
	}
	// pingBoth pings each machine's pod network from the other's.
	pingBoth := func() error {
		for i := range 2 {
			if err := ping(i); err != nil {
				return err
			}
		}
		return nil
	}
	if ping(0) == nil {
		t.Fatal("the pod networks reach each other before anything is programmed")
	}
	client := fake.NewClientset(nodes[0], nodes[1])
	// run starts both machines' components in mode and returns their stop.
	run := func(mode Mode) func() {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 2)
		for i, m := range lab.Machines {
			go func() {
				done <- Run(ctx, Options{Client: client, NodeName: m.Name, Mode: mode, ClusterCIDR: netip.MustParsePrefix("10.149.0.0/16"),
					Bridge: "mznpu0", VNI: 42, Port: 4789, Resync: 200 * time.Millisecond, Handle: handles[i]})
			}()
		}
		return func() {
			cancel()
			for range 2 {
				if err := <-done; err != nil {
					t.Error(err)
				}
			}
		}
	}
	eventually := func(what string, check func() error) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := check()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	condition := func(name string) (*v1.NodeCondition, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeNetworkUnavailable {
				return &c, nil
			}
		}
		return nil, fmt.Errorf("node %s has no NetworkUnavailable condition", name)
	}

	// Alone, a node publishes its backend and makes no vxlan device.
	{
		alone := fake.NewClientset(nodes[0].DeepCopy())
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{Client: alone, NodeName: lab.Machines[0].Name, Mode: VXLAN, ClusterCIDR: netip.MustParsePrefix("10.149.0.0/16"),
				Bridge: "mznpu0", VNI: 42, Port: 4789, Resync: 200 * time.Millisecond, Handle: handles[0]})
		}()
		eventually("a lone node reports its pod network", func() error {
			n, err := alone.CoreV1().Nodes().Get(ctx, lab.Machines[0].Name, metav1.GetOptions{})
			if err != nil || n.Annotations[AnnotationBackend] != "vxlan" {
				return fmt.Errorf("annotations %v %v", n.Annotations, err)
			}
			return nil
		})
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if _, err := handles[0].LinkByName("mznpu0.vx"); err == nil {
			t.Error("a lone node made a vxlan device")
		}
	}

	stop := run(VXLAN)
	eventually("vxlan: the pod networks reach each other", pingBoth)
	for _, m := range lab.Machines {
		c, err := condition(m.Name)
		if err != nil || c.Status != v1.ConditionFalse || c.Reason != ReasonReady {
			t.Errorf("vxlan: %s's condition %+v %v", m.Name, c, err)
		}
		n, _ := client.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
		if n.Annotations[AnnotationBackend] != "vxlan" || n.Annotations[AnnotationPublicIP] != m.Addr.String() || n.Annotations[AnnotationVTEPMAC] == "" {
			t.Errorf("vxlan: %s's annotations %v", m.Name, n.Annotations)
		}
	}
	if out, _ := lab.Machines[0].Run(ctx, "ip", "route", "show", "10.149.2.0/24"); !strings.Contains(out, "via 10.149.2.0 dev mznpu0.vx") || !strings.Contains(out, "onlink") {
		t.Errorf("vxlan route on machine 1: %q", out)
	}
	stop()

	stop = run(HostGW)
	// Both machines switch on their own: each must have its route to the
	// other's pods (and no vxlan device) before the pods can reach each other.
	eventually("host-gw: the vxlan devices are gone and the routes go through the nodes", func() error {
		for i := range 2 {
			out, _ := lab.Machines[i].Run(ctx, "ip", "route", "show", cidrs[1-i])
			if want := "via " + lab.Machines[1-i].Addr.String() + " dev eth0"; !strings.Contains(out, want) {
				return fmt.Errorf("route on machine %d %q, want %q", i+1, out, want)
			}
			if _, err := handles[i].LinkByName("mznpu0.vx"); err == nil {
				return fmt.Errorf("mznpu0.vx is still there on machine %d", i+1)
			}
		}
		return nil
	})
	eventually("host-gw: the pod networks reach each other", pingBoth)
	// A node on another network cannot be reached by host-gw: said on the Node.
	far := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "far"}, Spec: v1.NodeSpec{PodCIDR: "10.149.3.0/24"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.99.0.7"}}}}
	if _, err := client.CoreV1().Nodes().Create(ctx, far, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("host-gw: a node across subnets is reported", func() error {
		c, err := condition(lab.Machines[0].Name)
		if err != nil {
			return err
		}
		if c.Status != v1.ConditionTrue || c.Reason != ReasonUnreachable || !strings.Contains(c.Message, "node far (10.99.0.7)") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	// The event is written by the recorder's own goroutine, after the condition.
	eventually("host-gw: a Warning event says so", func() error {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Reason == ReasonUnreachable && e.InvolvedObject.Name == lab.Machines[0].Name && e.Type == v1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no %s Warning event on %s: %+v", ReasonUnreachable, lab.Machines[0].Name, events.Items)
	})
	// Removing a node removes its route.
	if err := client.CoreV1().Nodes().Delete(ctx, lab.Machines[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the deleted node's route goes", func() error {
		if out, _ := lab.Machines[0].Run(ctx, "ip", "route", "show", "10.149.2.0/24"); strings.TrimSpace(out) != "" {
			return fmt.Errorf("route still there: %q", out)
		}
		return nil
	})
	stop()
}
