package netpol

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"mizzen/internal/testing/netlab"
)

// inNetns runs f on a thread switched into the named network namespace: sockets it
// opens stay in that namespace.
func inNetns(t *testing.T, name string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the thread is left in the namespace and dies with the goroutine
		ns, err := netns.GetFromName(name)
		if err != nil {
			t.Error(err)
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		f()
	}()
	<-done
}

// TestTableEnforces builds a node (a network namespace with a bridge, as the CNI plugin
// makes it) with two pods (namespaces on the bridge), writes the compiled table into the
// node, and checks what the pods observe: a denied new connection times out, a
// connection established before the policy keeps working, and the allowed peer connects.
func TestTableEnforces(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	lab, err := netlab.New("mznpv", "10.250.151.0/24", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lab.Close() })
	node := lab.Machines[0]
	ctx := context.Background()
	pods := map[string]string{"mznpv-pa": "10.151.0.2", "mznpv-pb": "10.151.0.3", "mznpv-pc": "10.151.0.4"}
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "-n", node.Name, "link", "add", "mznpv0", "type", "bridge")
	run("ip", "-n", node.Name, "addr", "add", "10.151.0.1/24", "dev", "mznpv0")
	run("ip", "-n", node.Name, "link", "set", "mznpv0", "up")
	i := 0
	for name, ip := range pods {
		i++
		_ = exec.Command("ip", "netns", "delete", name).Run()
		run("ip", "netns", "add", name)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
		host := fmt.Sprintf("mznpv-v%d", i)
		run("ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", name)
		run("ip", "link", "set", host, "netns", node.Name)
		run("ip", "-n", node.Name, "link", "set", host, "master", "mznpv0", "up")
		run("ip", "-n", name, "addr", "add", ip+"/24", "dev", "eth0")
		run("ip", "-n", name, "link", "set", "eth0", "up")
		run("ip", "-n", name, "link", "set", "lo", "up")
	}
	// Bridged traffic must pass the IP hooks (br_netfilter), as on a real node.
	if out, err := node.Run(ctx, "sysctl", "-n", "net.bridge.bridge-nf-call-iptables"); err != nil || strings.TrimSpace(out) != "1" {
		t.Skipf("bridged traffic does not pass the IP hooks here (br_netfilter): %v %s", err, out)
	}

	// pb serves TCP on 8080; pa and pc are clients.
	var ln net.Listener
	inNetns(t, "mznpv-pb", func() { ln, err = net.Listen("tcp", "10.151.0.3:8080") })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo each line back
				defer c.Close()
				buf := make([]byte, 64)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	dial := func(from string) (net.Conn, error) {
		var c net.Conn
		var err error
		inNetns(t, from, func() { c, err = net.DialTimeout("tcp", "10.151.0.3:8080", time.Second) })
		return c, err
	}
	echo := func(c net.Conn) error {
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err := c.Read(buf)
		return err
	}
	nsFd, err := netns.GetFromName(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer nsFd.Close()
	table := Table{Name: "mizzen-netpol-mznpv0", Conn: func() (*nftables.Conn, error) { return nftables.New(nftables.WithNetNSFd(int(nsFd))) }}
	// The table is there from the agent's start (empty: nothing isolated), so conntrack
	// follows the node's connections before any policy exists, as on a real node.
	if err := table.Apply(Compile(Input{NodeName: "node"})); err != nil {
		t.Fatal(err)
	}
	defer table.Delete()
	established, err := dial("mznpv-pa")
	if err != nil {
		t.Fatalf("before any policy: %v", err)
	}
	defer established.Close()

	// Only pods labelled role=client in namespace "a" may connect to pb, on 8080.
	tcp := v1.ProtocolTCP
	mkpod := func(name, ns, ip string, labels map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: v1.PodSpec{NodeName: "node"}, Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: ip}}
	}
	in := Input{NodeName: "node",
		Pods: []*v1.Pod{mkpod("pa", "a", "10.151.0.2", nil), mkpod("pb", "a", "10.151.0.3", map[string]string{"app": "server"}),
			mkpod("pc", "a", "10.151.0.4", map[string]string{"role": "client"})},
		Namespaces: []*v1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}},
		Policies: []*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstrInt(8080))}},
				}}}}},
	}
	rs := Compile(in)
	if _, ok := rs.Ingress[netip.MustParseAddr("10.151.0.3")]; !ok {
		t.Fatalf("pb is not isolated: %+v", rs)
	}
	if err := table.Update(Compile(Input{NodeName: "node"}), rs); err != nil { // as Run does between resyncs
		t.Fatal(err)
	}
	if c, err := dial("mznpv-pa"); err == nil {
		c.Close()
		t.Error("pa opened a new connection to the isolated pb")
	}
	if err := echo(established); err != nil {
		t.Errorf("the connection established before the policy broke: %v", err)
	}
	c, err := dial("mznpv-pc")
	if err != nil {
		t.Fatalf("pc, allowed, did not connect: %v", err)
	}
	if err := echo(c); err != nil {
		t.Error(err)
	}
	c.Close()
	// The same, written whole, is the same table.
	if err := table.Apply(rs); err != nil {
		t.Fatal(err)
	}
	if c, err := dial("mznpv-pa"); err == nil {
		c.Close()
		t.Error("pa opened a new connection to the isolated pb after a full write")
	}
	// A rule allowing pa's address too: pb's chain is refilled, pa connects.
	in.Policies[0].Spec.Ingress[0].From = append(in.Policies[0].Spec.Ingress[0].From,
		networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.151.0.2/32"}})
	rs2 := Compile(in)
	if err := table.Update(rs, rs2); err != nil {
		t.Fatal(err)
	}
	if c, err := dial("mznpv-pa"); err != nil {
		t.Errorf("pa, now allowed, did not connect: %v", err)
	} else {
		c.Close()
	}
	// Without policies, pa connects again.
	if err := table.Update(rs2, Compile(Input{NodeName: "node", Pods: in.Pods})); err != nil {
		t.Fatal(err)
	}
	c, err = dial("mznpv-pa")
	if err != nil {
		t.Fatalf("without policies: %v", err)
	}
	c.Close()
	if out, _ := node.Run(ctx, "nft", "list", "table", "ip", "mizzen-netpol-mznpv0"); !strings.Contains(out, "hook forward") || strings.Contains(out, "10.151.0.3") {
		t.Errorf("table without policies: %s", out)
	}
}

func intstrInt(v int32) intstr.IntOrString { return intstr.FromInt32(v) }
