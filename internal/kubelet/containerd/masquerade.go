package containerd

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// masqueradeTable names the node's own nftables table for the pod network behind bridge.
func masqueradeTable(bridge string, v6 bool) *nftables.Table {
	family := nftables.TableFamilyIPv4
	if v6 {
		family = nftables.TableFamilyIPv6
	}
	return &nftables.Table{Family: family, Name: "mizzen-" + bridge}
}

// EnsureMasquerade installs the one rule that masquerades pod traffic leaving the pod
// network: source in podCIDR, destination neither in clusterCIDR (every node's pods;
// podCIDR when empty) nor multicast. It stands in
// for the bridge plugin's ipMasq, which adds an iptables chain per pod: under a burst of
// pod starts those iptables runs (serialized by the xtables lock) were the largest single
// CPU cost of a sandbox. The rule lives in a table of its own, so this is idempotent and
// leaves every other rule on the host alone.
func EnsureMasquerade(bridge, podCIDR, clusterCIDR string) error {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	prefix = prefix.Masked()
	cluster := prefix
	if clusterCIDR != "" {
		if cluster, err = netip.ParsePrefix(clusterCIDR); err != nil || cluster.Addr().Is6() != prefix.Addr().Is6() {
			return fmt.Errorf("cluster CIDR %q: not a CIDR of the pod CIDR's family", clusterCIDR)
		}
		cluster = cluster.Masked()
	}
	v6 := prefix.Addr().Is6()
	// Offsets of the source and destination addresses in the IPv4 and IPv6 headers.
	srcOff, dstOff, size := uint32(12), uint32(16), uint32(4)
	multicast := netip.MustParsePrefix("224.0.0.0/4")
	if v6 {
		srcOff, dstOff, size = 8, 24, 16
		multicast = netip.MustParsePrefix("ff00::/8")
	}
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	table := conn.AddTable(masqueradeTable(bridge, v6))
	conn.FlushTable(table)
	chain := conn.AddChain(&nftables.Chain{
		Name: "postrouting", Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource,
	})
	var exprs []expr.Any
	exprs = append(exprs, matchPrefix(srcOff, size, prefix, expr.CmpOpEq)...)
	exprs = append(exprs, matchPrefix(dstOff, size, cluster, expr.CmpOpNeq)...)
	exprs = append(exprs, matchPrefix(dstOff, size, multicast, expr.CmpOpNeq)...)
	exprs = append(exprs, &expr.Masq{})
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("installing the pod network's masquerade rule: %w", err)
	}
	return nil
}

// matchPrefix compares the address at offset in the network header, masked to p's
// length, with p's network address.
func matchPrefix(offset, size uint32, p netip.Prefix, op expr.CmpOp) []expr.Any {
	mask := net.CIDRMask(p.Bits(), int(size*8))
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: size},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: size, Mask: mask, Xor: make([]byte, size)},
		&expr.Cmp{Op: op, Register: 1, Data: p.Addr().AsSlice()},
	}
}

// RemoveMasquerade deletes the tables EnsureMasquerade made for bridge, if any.
func RemoveMasquerade(bridge string) error {
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	tables, err := conn.ListTables()
	if err != nil {
		return err
	}
	for _, v6 := range []bool{false, true} {
		want := masqueradeTable(bridge, v6)
		for _, t := range tables {
			if t.Name == want.Name && t.Family == want.Family {
				conn.DelTable(t)
			}
		}
	}
	return conn.Flush()
}
