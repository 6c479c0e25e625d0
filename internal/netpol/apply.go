package netpol

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// TableName is the node's table for the pod bridge bridge: `ip mizzen-netpol`, or
// `ip mizzen-netpol-BRIDGE` for another bridge than mizzen0 (clusters sharing a host).
func TableName(bridge string) string {
	if bridge == "" || bridge == "mizzen0" {
		return "mizzen-netpol"
	}
	return "mizzen-netpol-" + bridge
}

// Table writes rulesets into one nftables table.
type Table struct {
	Name string
	// Conn is the netlink connection (of a network namespace); a new one per Apply
	// in this process's namespace when nil.
	Conn func() (*nftables.Conn, error)
}

func (t Table) conn() (*nftables.Conn, error) {
	if t.Conn != nil {
		return t.Conn()
	}
	return nftables.New()
}

// Apply replaces the table's content with rs in one batch, which the kernel commits
// atomically: a packet sees the old rules or the new ones.
//
// The table has two base chains on the forward hook, egress (priority -1) and ingress
// (priority 0). Each accepts the packets of established connections, then sends a new
// connection from (egress) or to (ingress) an isolated pod of this node, through a
// verdict map keyed by the pod's address, to the pod's chain: its rules accept what
// they allow, and the chain ends by dropping the rest. Traffic between a pod and its
// own node (the input and output hooks) is never filtered, as upstream specifies.
func (t Table) Apply(rs Ruleset) error {
	c, err := t.conn()
	if err != nil {
		return err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return err
	}
	for _, tb := range tables {
		if tb.Name == t.Name {
			c.DelTable(tb)
		}
	}
	tbl := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: t.Name})
	for _, dir := range []struct {
		name     string
		prio     int32
		addrOff  uint32
		peerOff  uint32
		perPod   map[netip.Addr][]Rule
		mapName  string
		chainFmt string
	}{
		{"egress", -1, 12, 16, rs.Egress, "egress-pods", "egress-%s"},
		{"ingress", 0, 16, 12, rs.Ingress, "ingress-pods", "ingress-%s"},
	} {
		base := c.AddChain(&nftables.Chain{Name: dir.name, Table: tbl, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityRef(nftables.ChainPriority(dir.prio))})
		c.AddRule(&nftables.Rule{Table: tbl, Chain: base, Exprs: []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: make([]byte, 4)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
		vmap := &nftables.Set{Table: tbl, Name: dir.mapName, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
		addrs := make([]netip.Addr, 0, len(dir.perPod))
		for a := range dir.perPod {
			addrs = append(addrs, a)
		}
		slices.SortFunc(addrs, netip.Addr.Compare)
		var elems []nftables.SetElement
		for _, a := range addrs {
			chain := c.AddChain(&nftables.Chain{Name: fmt.Sprintf(dir.chainFmt, a), Table: tbl})
			if err := addPodRules(c, tbl, chain, dir.perPod[a], dir.peerOff); err != nil {
				return err
			}
			elems = append(elems, nftables.SetElement{Key: a.AsSlice(), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: chain.Name}})
		}
		if err := c.AddSet(vmap, elems); err != nil {
			return err
		}
		c.AddRule(&nftables.Rule{Table: tbl, Chain: base, Exprs: []expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: dir.addrOff, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: vmap.Name, SetID: vmap.ID, IsDestRegSet: true, DestRegister: 0},
		}})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("writing nftables table %s: %w", t.Name, err)
	}
	return nil
}

// addPodRules fills an isolated pod's chain: its rules, then a counted drop.
func addPodRules(c *nftables.Conn, tbl *nftables.Table, chain *nftables.Chain, rules []Rule, peerOff uint32) error {
	for _, r := range rules {
		exprs, err := ruleExprs(c, tbl, r, peerOff)
		if err != nil {
			return err
		}
		c.AddRule(&nftables.Rule{Table: tbl, Chain: chain, Exprs: exprs})
	}
	c.AddRule(&nftables.Rule{Table: tbl, Chain: chain, Exprs: []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}})
	return nil
}

// Update turns the table holding prev into next, in one batch, touching only the pods
// whose rules changed: a pod no longer isolated leaves its verdict map and its chain
// goes, a newly isolated pod gets a chain and an element, and a pod whose rules changed
// has its chain flushed and refilled. Established connections are untouched either way.
func (t Table) Update(prev, next Ruleset) error {
	c, err := t.conn()
	if err != nil {
		return err
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: t.Name}
	changed := false
	for _, dir := range []struct {
		old, new          map[netip.Addr][]Rule
		peerOff           uint32
		mapName, chainFmt string
	}{
		{prev.Egress, next.Egress, 16, "egress-pods", "egress-%s"},
		{prev.Ingress, next.Ingress, 12, "ingress-pods", "ingress-%s"},
	} {
		vmap := &nftables.Set{Table: tbl, Name: dir.mapName, IsMap: true, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict}
		var gone, added []nftables.SetElement
		for a := range dir.old {
			if _, ok := dir.new[a]; !ok {
				gone = append(gone, nftables.SetElement{Key: a.AsSlice()})
			}
		}
		if len(gone) > 0 {
			if err := c.SetDeleteElements(vmap, gone); err != nil {
				return err
			}
			for _, e := range gone {
				a, _ := netip.AddrFromSlice(e.Key)
				chain := &nftables.Chain{Table: tbl, Name: fmt.Sprintf(dir.chainFmt, a)}
				c.FlushChain(chain)
				c.DelChain(chain)
			}
			changed = true
		}
		for a, rules := range dir.new {
			old, had := dir.old[a]
			if had && slices.EqualFunc(old, rules, ruleEqual) {
				continue
			}
			chain := &nftables.Chain{Table: tbl, Name: fmt.Sprintf(dir.chainFmt, a)}
			if had {
				c.FlushChain(chain)
			} else {
				chain = c.AddChain(chain)
				added = append(added, nftables.SetElement{Key: a.AsSlice(), VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: chain.Name}})
			}
			if err := addPodRules(c, tbl, chain, rules, dir.peerOff); err != nil {
				return err
			}
			changed = true
		}
		if len(added) > 0 {
			if err := c.SetAddElements(vmap, added); err != nil {
				return err
			}
		}
	}
	if !changed {
		return nil
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("updating nftables table %s: %w", t.Name, err)
	}
	return nil
}

func ruleEqual(a, b Rule) bool {
	return a.Any == b.Any && a.Proto == b.Proto && a.PortLo == b.PortLo && a.PortHi == b.PortHi && slices.Equal(a.Peers, b.Peers)
}

// ruleExprs match one Rule (peer at peerOff in the IPv4 header) and accept.
func ruleExprs(c *nftables.Conn, tbl *nftables.Table, r Rule, peerOff uint32) ([]expr.Any, error) {
	var exprs []expr.Any
	if !r.Any {
		set := &nftables.Set{Table: tbl, Anonymous: true, Constant: true, Interval: true, KeyType: nftables.TypeIPAddr}
		if err := c.AddSet(set, intervalElements(r.Peers)); err != nil {
			return nil, err
		}
		exprs = append(exprs,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: peerOff, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID})
	}
	if r.Proto != 0 {
		exprs = append(exprs,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.Proto}})
		if r.PortLo != 0 {
			exprs = append(exprs, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2})
			if r.PortLo == r.PortHi {
				exprs = append(exprs, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(r.PortLo)})
			} else {
				exprs = append(exprs, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: be16(r.PortLo), ToData: be16(r.PortHi)})
			}
		}
	}
	return append(exprs, &expr.Verdict{Kind: expr.VerdictAccept}), nil
}

// intervalElements are the elements of an interval set holding ranges: each range's
// start, and the address after its end marked as an interval end, after the leading
// end at 0.0.0.0 that nft itself writes.
func intervalElements(rs []Range) []nftables.SetElement {
	elems := []nftables.SetElement{{Key: []byte{0, 0, 0, 0}, IntervalEnd: true}}
	for _, r := range rs {
		if r.Lo == netip.IPv4Unspecified() {
			elems = elems[1:]
		}
		elems = append(elems, nftables.SetElement{Key: r.Lo.AsSlice()})
		if next := r.Hi.Next(); next.IsValid() {
			elems = append(elems, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return elems
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// Delete removes the table, if it is there.
func (t Table) Delete() error {
	c, err := t.conn()
	if err != nil {
		return err
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return err
	}
	for _, tb := range tables {
		if tb.Name == t.Name {
			c.DelTable(tb)
			return c.Flush()
		}
	}
	return nil
}
