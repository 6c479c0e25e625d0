// Package netlab gives a test several machines on one host: network namespaces on
// one bridge, each with an address of its own, as the servers and nodes of a
// cluster have on a LAN. The host is the bridge's gateway address, so a process on
// the host is reachable from every machine and every machine from the host.
//
// A lab is named by a prefix (at most 8 characters), which names its bridge, its
// namespaces and its veth pairs, so tests running side by side on one host each
// use their own; New first removes whatever a crashed run of the same prefix left.
package netlab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// Lab is a bridge on the host and the machines attached to it.
type Lab struct {
	// Bridge is the host's bridge between the machines.
	Bridge string
	// Gateway is the host's address on the bridge.
	Gateway netip.Addr
	// Prefix is the subnet of the bridge, one /24.
	Prefix   netip.Prefix
	Machines []*Machine
	prefix   string
}

// Machine is one network namespace on the lab's bridge.
type Machine struct {
	// Name is the machine's network namespace (for `ip netns exec`).
	Name string
	// Addr is the machine's address on its eth0.
	Addr netip.Addr
}

// New creates a lab of n machines named PREFIX-1..PREFIX-n on the /24 subnet (like
// "10.250.7.0/24"): the host takes .1, machine i takes .(i+1).
func New(prefix, subnet string, n int) (*Lab, error) {
	if prefix == "" || len(prefix) > 8 {
		return nil, fmt.Errorf("netlab: prefix %q must have 1 to 8 characters (link names are at most 15)", prefix)
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || p.Bits() != 24 || !p.Addr().Is4() || n < 1 || n > 250 {
		return nil, fmt.Errorf("netlab: want an IPv4 /24 and 1..250 machines, got %q and %d", subnet, n)
	}
	p = p.Masked()
	l := &Lab{Bridge: prefix + "-br", Gateway: p.Addr().Next(), Prefix: p, prefix: prefix}
	l.removeLeftovers(n)
	if err := l.setUpBridge(); err != nil {
		_ = l.Close()
		return nil, err
	}
	addr := l.Gateway
	for i := 1; i <= n; i++ {
		addr = addr.Next()
		m := &Machine{Name: fmt.Sprintf("%s-%d", prefix, i), Addr: addr}
		if err := l.attach(m, i); err != nil {
			_ = l.Close()
			return nil, err
		}
		l.Machines = append(l.Machines, m)
	}
	return l, nil
}

func (l *Lab) setUpBridge() error {
	return run(
		[]string{"ip", "link", "add", l.Bridge, "type", "bridge"},
		[]string{"ip", "addr", "add", fmt.Sprintf("%s/%d", l.Gateway, l.Prefix.Bits()), "dev", l.Bridge},
		[]string{"ip", "link", "set", l.Bridge, "up"},
	)
}

// attach makes the machine's namespace and wires it to the bridge with a veth pair
// whose namespace end is eth0.
func (l *Lab) attach(m *Machine, i int) error {
	hostEnd, nsEnd := fmt.Sprintf("%s-h%d", l.prefix, i), fmt.Sprintf("%s-n%d", l.prefix, i)
	return run(
		[]string{"ip", "netns", "add", m.Name},
		[]string{"ip", "link", "add", hostEnd, "type", "veth", "peer", "name", nsEnd},
		[]string{"ip", "link", "set", hostEnd, "master", l.Bridge, "up"},
		[]string{"ip", "link", "set", nsEnd, "netns", m.Name},
		[]string{"ip", "-n", m.Name, "link", "set", nsEnd, "name", "eth0"},
		[]string{"ip", "-n", m.Name, "addr", "add", fmt.Sprintf("%s/%d", m.Addr, l.Prefix.Bits()), "dev", "eth0"},
		[]string{"ip", "-n", m.Name, "link", "set", "eth0", "up"},
		[]string{"ip", "-n", m.Name, "link", "set", "lo", "up"},
		[]string{"ip", "-n", m.Name, "route", "add", "default", "via", l.Gateway.String()},
	)
}

// Command runs a program inside the machine's network namespace (its mounts and
// processes are the host's: a test gives each machine its own data directory). It
// enters the network namespace only: `ip netns exec` would also give the program a
// mount namespace of its own with a fresh /sys, where the cgroup filesystem runc needs
// is missing.
func (m *Machine) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=/run/netns/" + m.Name, "--", name}, args...)...)
}

// Run runs a program inside the machine's namespace and returns its combined output.
func (m *Machine) Run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := m.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), m.Name, err, out)
	}
	return string(out), nil
}

// Close removes the machines' namespaces (their veth pairs go with them) and the
// bridge. Processes still running inside a namespace keep it alive: stop them first.
func (l *Lab) Close() error {
	var errs []error
	for _, m := range l.Machines {
		if out, err := exec.Command("ip", "netns", "delete", m.Name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("deleting netns %s: %w: %s", m.Name, err, out))
		}
	}
	if out, err := exec.Command("ip", "link", "delete", l.Bridge).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("deleting bridge %s: %w: %s", l.Bridge, err, out))
	}
	l.Machines = nil
	return errors.Join(errs...)
}

// removeLeftovers deletes what a crashed run with the same prefix left behind.
func (l *Lab) removeLeftovers(n int) {
	for i := 1; i <= n; i++ {
		_ = exec.Command("ip", "netns", "delete", fmt.Sprintf("%s-%d", l.prefix, i)).Run()
		_ = exec.Command("ip", "link", "delete", fmt.Sprintf("%s-h%d", l.prefix, i)).Run()
	}
	_ = exec.Command("ip", "link", "delete", l.Bridge).Run()
}

func run(cmds ...[]string) error {
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("netlab: %s: %w: %s", strings.Join(c, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
