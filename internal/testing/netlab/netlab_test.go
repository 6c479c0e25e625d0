package netlab

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMachinesReachEachOtherAndTheHost pings between two machines and from a
// machine to the host's gateway address, then checks Close leaves nothing.
func TestMachinesReachEachOtherAndTheHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	lab, err := New("mznlabt", "10.250.99.0/24", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	ctx := context.Background()
	a, b := lab.Machines[0], lab.Machines[1]
	if a.Addr.String() != "10.250.99.2" || b.Addr.String() != "10.250.99.3" || lab.Gateway.String() != "10.250.99.1" {
		t.Fatalf("addresses: %s %s gateway %s", a.Addr, b.Addr, lab.Gateway)
	}
	// A TCP listener on the host's gateway address, dialled from a machine.
	ln, err := net.Listen("tcp", lab.Gateway.String()+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("hello from the host\n"))
			c.Close()
		}
	}()
	if out, err := a.Run(ctx, "busybox", "ping", "-c1", "-W2", b.Addr.String()); err != nil {
		t.Fatalf("machine to machine: %v %s", err, out)
	}
	if out, err := b.Run(ctx, "bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(ln.Addr().String(), ":", "/", 1)+"; cat <&3"); err != nil || !strings.Contains(out, "hello from the host") {
		t.Fatalf("machine to host: %v %q", err, out)
	}
	if err := lab.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "mznlabt") {
		t.Errorf("namespaces left: %s", out)
	}
	if exec.Command("ip", "link", "show", "mznlabt-br").Run() == nil {
		t.Error("bridge left")
	}
}
