package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Table writes rulesets to the proxy's nftables table. The zero value is table ip
// mizzen-proxy in the calling process's network namespace; NetNS names another
// namespace by an open fd (tests), Name another table (TableNameFor).
type Table struct {
	NetNS int
	Name  string
}

// TableNameFor names the table of the proxy of a node whose pod network is bridge:
// mizzen-proxy for the default bridge, mizzen-proxy-BRIDGE for others, so that several
// clusters sharing a host (tests) do not rewrite each other's rules.
func TableNameFor(bridge string) string {
	if bridge == "" || bridge == "mizzen0" {
		return TableName
	}
	return TableName + "-" + bridge
}

func (t Table) conn() (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.WithSockOptions(batchBuffers)}
	if t.NetNS != 0 {
		opts = append(opts, nftables.WithNetNSFd(t.NetNS))
	}
	return nftables.New(opts...)
}

// batchBufferSize bounds the socket buffers of a netlink connection writing the table.
// A whole table goes in one batch (one sendmsg), and the kernel acknowledges each of
// its messages before the first is read: with the default buffers (about 200 KiB) a
// few dozen services fail to send (EMSGSIZE) or lose their acknowledgements (ENOBUFS),
// and every later sync fails the same way. nft itself sizes its buffers to the batch.
const batchBufferSize = 64 << 20

// batchBuffers raises the connection's buffers past the system's maximum, as root may
// (SO_SNDBUFFORCE, SO_RCVBUFFORCE; the kernel only charges what is queued), and asks
// for acknowledgements without a copy of each request (NETLINK_CAP_ACK).
func batchBuffers(c *netlink.Conn) error {
	if err := c.SetOption(netlink.CapAcknowledge, true); err != nil {
		return fmt.Errorf("netlink: NETLINK_CAP_ACK: %w", err)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		for _, o := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[0], batchBufferSize) != nil {
				// Without CAP_NET_ADMIN: as much as net.core.[rw]mem_max allows.
				if e := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, o[1], batchBufferSize); e != nil && serr == nil {
					serr = e
				}
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}

func (t Table) table() *nftables.Table {
	name := t.Name
	if name == "" {
		name = TableName
	}
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: name}
}

// Apply makes the table hold exactly rs, in one netlink batch, which the kernel
// commits atomically: packets see the old rules or the new ones, never a table in
// between. Every chain is emptied and refilled, every set and map replaced, and what rs
// no longer has is deleted; the sets that remember session affinity clients keep their
// elements.
func (t Table) Apply(rs *Ruleset) error {
	conn, err := t.conn()
	if err != nil {
		return err
	}
	tbl := t.table()
	oldChains, oldSets, err := existing(conn, tbl)
	if err != nil {
		return err
	}
	conn.AddTable(tbl)

	// Empty every chain first, new or old, so that nothing refers to what is replaced
	// or deleted below.
	chains := map[string]*nftables.Chain{}
	for _, c := range rs.Chains {
		ch := &nftables.Chain{Name: c.Name, Table: tbl}
		if c.Hook != nil {
			hook, typ, err := hookOf(c.Hook)
			if err != nil {
				return err
			}
			prio := nftables.ChainPriority(c.Hook.Priority)
			ch.Type, ch.Hooknum, ch.Priority = typ, hook, &prio
		}
		chains[c.Name] = conn.AddChain(ch)
		conn.FlushChain(ch)
	}
	for name := range oldChains {
		if chains[name] == nil {
			conn.FlushChain(&nftables.Chain{Name: name, Table: tbl})
		}
	}

	sets := map[string]*nftables.Set{}
	for _, s := range rs.Sets {
		set := &nftables.Set{Table: tbl, Name: s.Name, KeyType: datatype(s.Type), Concatenation: s.Type != KeyAddr}
		if s.Timeout > 0 {
			set.HasTimeout, set.Dynamic, set.Timeout = true, true, s.Timeout
			if old, ok := oldSets[s.Name]; ok && old.HasTimeout && old.Timeout == s.Timeout {
				sets[s.Name] = old // kept with the clients it remembers
				continue
			}
		}
		if old, ok := oldSets[s.Name]; ok {
			conn.DelSet(old)
		}
		elems := make([]nftables.SetElement, len(s.Elements))
		for i, e := range s.Elements {
			elems[i] = nftables.SetElement{Key: keyBytes(s.Type, e)}
		}
		if err := conn.AddSet(set, elems); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
		sets[s.Name] = set
	}
	for _, m := range rs.Maps {
		set := &nftables.Set{Table: tbl, Name: m.Name, IsMap: true, KeyType: datatype(m.Type),
			DataType: nftables.TypeVerdict, Concatenation: m.Type != KeyAddr}
		if old, ok := oldSets[m.Name]; ok {
			conn.DelSet(old)
		}
		elems := make([]nftables.SetElement, len(m.Elements))
		for i, e := range m.Elements {
			elems[i] = nftables.SetElement{Key: keyBytes(m.Type, e.Key), VerdictData: verdictExpr(e.Verdict)}
		}
		if err := conn.AddSet(set, elems); err != nil {
			return fmt.Errorf("map %s: %w", m.Name, err)
		}
		sets[m.Name] = set
	}

	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			var exprs []expr.Any
			for _, s := range r {
				e, err := stmtExprs(conn, tbl, sets, s)
				if err != nil {
					return fmt.Errorf("chain %s: %w", c.Name, err)
				}
				exprs = append(exprs, e...)
			}
			conn.AddRule(&nftables.Rule{Table: tbl, Chain: chains[c.Name], Exprs: exprs})
		}
	}

	for name, old := range oldSets {
		if sets[name] == nil {
			conn.DelSet(old)
		}
	}
	for name := range oldChains {
		if chains[name] == nil {
			conn.DelChain(&nftables.Chain{Name: name, Table: tbl})
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("writing table ip %s: %w", tbl.Name, err)
	}
	return nil
}

// existing lists the chains and named sets (maps included) the table has now; none
// when it does not exist yet.
func existing(conn *nftables.Conn, tbl *nftables.Table) (map[string]bool, map[string]*nftables.Set, error) {
	chains, sets := map[string]bool{}, map[string]*nftables.Set{}
	all, err := conn.ListChainsOfTableFamily(tbl.Family)
	if err != nil {
		return nil, nil, fmt.Errorf("listing chains: %w", err)
	}
	for _, c := range all {
		if c.Table.Name == tbl.Name {
			chains[c.Name] = true
		}
	}
	if len(chains) == 0 {
		if _, err := conn.ListTableOfFamily(tbl.Name, tbl.Family); err != nil {
			return chains, sets, nil // no table yet
		}
	}
	list, err := conn.GetSets(tbl)
	if err != nil {
		return nil, nil, fmt.Errorf("listing sets: %w", err)
	}
	for _, s := range list {
		if s.Anonymous || strings.HasPrefix(s.Name, "__") {
			continue // belong to rules, and go with them
		}
		s.Table = tbl
		sets[s.Name] = s
	}
	return chains, sets, nil
}

// Delete removes the table, if it exists.
func (t Table) Delete() error {
	conn, err := t.conn()
	if err != nil {
		return err
	}
	tbl := t.table()
	conn.AddTable(tbl)
	conn.DelTable(tbl)
	if err := conn.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("deleting table ip %s: %w", tbl.Name, err)
	}
	return nil
}

func hookOf(h *Hook) (*nftables.ChainHook, nftables.ChainType, error) {
	typ := nftables.ChainTypeFilter
	if h.Type == "nat" {
		typ = nftables.ChainTypeNAT
	}
	switch h.Hook {
	case "prerouting":
		return nftables.ChainHookPrerouting, typ, nil
	case "input":
		return nftables.ChainHookInput, typ, nil
	case "forward":
		return nftables.ChainHookForward, typ, nil
	case "output":
		return nftables.ChainHookOutput, typ, nil
	case "postrouting":
		return nftables.ChainHookPostrouting, typ, nil
	}
	return nil, "", fmt.Errorf("unknown hook %q", h.Hook)
}

func datatype(t KeyType) nftables.SetDatatype {
	switch t {
	case KeyAddr:
		return nftables.TypeIPAddr
	case KeyProtoPort:
		return nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
	default:
		return nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	}
}

// keyBytes lays a key out as the kernel compares it: each field of a concatenation
// padded to four bytes, addresses and ports in network order.
func keyBytes(t KeyType, k Key) []byte {
	protoPort := []byte{byte(k.Proto), 0, 0, 0, byte(k.Port >> 8), byte(k.Port), 0, 0}
	switch t {
	case KeyAddr:
		return k.Addr.AsSlice()
	case KeyProtoPort:
		return protoPort
	default:
		return append(k.Addr.AsSlice(), protoPort...)
	}
}

func verdictExpr(v Verdict) *expr.Verdict {
	switch v.Kind {
	case Jump:
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: v.Chain}
	case Goto:
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: v.Chain}
	case Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}
	default:
		return &expr.Verdict{Kind: expr.VerdictReturn}
	}
}

// Registers: 1 and 2 for single values; concatenated keys are built in the 32-bit
// registers from 8 (NFT_REG32_00) on, as nft builds them.
const concatReg = 8

// Offsets of the addresses in the IPv4 header.
const (
	saddrOffset = 12
	daddrOffset = 16
)

func loadAddr(source bool, reg uint32) expr.Any {
	off := uint32(daddrOffset)
	if source {
		off = saddrOffset
	}
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 4}
}

func loadDport(reg uint32) expr.Any {
	return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
}

func loadMark() expr.Any { return &expr.Meta{Key: expr.MetaKeyMARK, Register: 1} }

// stmtExprs translates one statement into netlink expressions. Anonymous maps that a
// statement needs are added to the batch here, before the rule that uses them.
func stmtExprs(conn *nftables.Conn, tbl *nftables.Table, sets map[string]*nftables.Set, s Stmt) ([]expr.Any, error) {
	zero := make([]byte, 4)
	switch s := s.(type) {
	case Verdict:
		if s.Kind == Reject {
			return []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3 /* ICMP port unreachable */}}, nil
		}
		return []expr.Any{verdictExpr(s)}, nil
	case MatchAddr:
		op := expr.CmpOpEq
		if s.Negate {
			op = expr.CmpOpNeq
		}
		out := []expr.Any{loadAddr(s.Source, 1)}
		if !s.Prefix.IsSingleIP() {
			out = append(out, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: net.CIDRMask(s.Prefix.Bits(), 32), Xor: zero})
		}
		return append(out, &expr.Cmp{Op: op, Register: 1, Data: s.Prefix.Masked().Addr().AsSlice()}), nil
	case MatchDaddrSet, MatchSaddrSet:
		name, source := "", false
		if m, ok := s.(MatchSaddrSet); ok {
			name, source = m.Set, true
		} else {
			name = s.(MatchDaddrSet).Set
		}
		set, ok := sets[name]
		if !ok {
			return nil, fmt.Errorf("no set %s", name)
		}
		return []expr.Any{loadAddr(source, 1), &expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID}}, nil
	case UpdateSet:
		set, ok := sets[s.Set]
		if !ok {
			return nil, fmt.Errorf("no set %s", s.Set)
		}
		return []expr.Any{loadAddr(true, 1), &expr.Dynset{SrcRegKey: 1, SetName: set.Name, SetID: set.ID,
			Operation: unix.NFT_DYNSET_OP_UPDATE}}, nil
	case MatchProto:
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(s.Proto)}},
		}, nil
	case MatchPort:
		return []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{byte(s.Proto)}},
			loadDport(1),
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(s.Port)},
		}, nil
	case MatchFibLocal:
		return []expr.Any{
			&expr.Fib{Register: 1, FlagSADDR: s.Source, FlagDADDR: !s.Source, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		}, nil
	case MatchCtNew:
		return []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW), Xor: zero},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: zero},
		}, nil
	case MatchMarkUnset:
		return []expr.Any{
			loadMark(),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(masqueradeBit), Xor: zero},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: zero},
		}, nil
	case SetMark:
		return []expr.Any{
			loadMark(),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(^uint32(masqueradeBit)),
				Xor:  binaryutil.NativeEndian.PutUint32(masqueradeBit)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		}, nil
	case ClearMark:
		return []expr.Any{
			loadMark(),
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(^uint32(0)),
				Xor:  binaryutil.NativeEndian.PutUint32(masqueradeBit)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		}, nil
	case Masquerade:
		return []expr.Any{&expr.Masq{FullyRandom: true}}, nil
	case DNAT:
		return []expr.Any{
			&expr.Immediate{Register: 1, Data: s.Addr.AsSlice()},
			&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(s.Port)},
			&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
		}, nil
	case VmapLookup:
		set, ok := sets[s.Map]
		if !ok {
			return nil, fmt.Errorf("no map %s", s.Map)
		}
		var out []expr.Any
		reg := uint32(concatReg)
		if s.Type != KeyProtoPort {
			out = append(out, loadAddr(false, reg))
			reg++
		}
		if s.Type != KeyAddr {
			out = append(out, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg}, loadDport(reg+1))
		}
		return append(out, &expr.Lookup{SourceRegister: concatReg, SetName: set.Name, SetID: set.ID,
			IsDestRegSet: true, DestRegister: 0}), nil
	case RandomGoto:
		m := &nftables.Set{Table: tbl, Anonymous: true, Constant: true, IsMap: true,
			KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
		elems := make([]nftables.SetElement, len(s.Chains))
		for i, c := range s.Chains {
			elems[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)),
				VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: c}}
		}
		if err := conn.AddSet(m, elems); err != nil {
			return nil, err
		}
		return []expr.Any{
			&expr.Numgen{Register: 1, Modulus: uint32(len(s.Chains)), Type: unix.NFT_NG_RANDOM},
			&expr.Lookup{SourceRegister: 1, SetName: m.Name, SetID: m.ID, IsDestRegSet: true, DestRegister: 0},
		}, nil
	}
	return nil, fmt.Errorf("unknown statement %T", s)
}
