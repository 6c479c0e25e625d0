// Package proxy is the node's service proxy: it turns Services and EndpointSlices into
// nftables rules in one table, `ip mizzen-proxy`, laid out as upstream kube-proxy's
// nftables mode lays out its `ip kube-proxy` table. Build is a pure function from the
// observed objects to a Ruleset; Apply writes a Ruleset to the kernel in one atomic
// batch; Run follows the apiserver and keeps the table in step.
package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// TableName is the proxy's nftables table, in the ip (IPv4) family.
const TableName = "mizzen-proxy"

// masqueradeBit is the packet mark bit that asks the masquerading chain to SNAT a
// connection, upstream's 0x4000.
const masqueradeBit = 0x4000

// Ruleset is the whole content of the proxy's table: named sets, verdict maps and
// chains. Its String form reads like `nft list table ip mizzen-proxy`.
type Ruleset struct {
	Sets   []Set
	Maps   []Map
	Chains []Chain
}

// KeyType is the shape of a set's or map's elements.
type KeyType int

const (
	// KeyAddr is an IPv4 address ("ipv4_addr").
	KeyAddr KeyType = iota
	// KeyProtoPort is a protocol and port ("inet_proto . inet_service").
	KeyProtoPort
	// KeyAddrProtoPort is an address, protocol and port.
	KeyAddrProtoPort
)

func (k KeyType) String() string {
	switch k {
	case KeyAddr:
		return "ipv4_addr"
	case KeyProtoPort:
		return "inet_proto . inet_service"
	default:
		return "ipv4_addr . inet_proto . inet_service"
	}
}

// Key is one element of a set or map; the fields its KeyType leaves out are zero.
type Key struct {
	Addr  netip.Addr
	Proto Protocol
	Port  uint16
}

func (k Key) format(t KeyType) string {
	switch t {
	case KeyAddr:
		return k.Addr.String()
	case KeyProtoPort:
		return fmt.Sprintf("%s . %d", k.Proto, k.Port)
	default:
		return fmt.Sprintf("%s . %s . %d", k.Addr, k.Proto, k.Port)
	}
}

// Protocol is a transport protocol a service port can use.
type Protocol uint8

// The IP protocol numbers of the protocols services use.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return fmt.Sprintf("%d", uint8(p))
}

// Set is a named set of keys. A set with a Timeout is filled by the packets
// themselves (UpdateSet) and forgets each key that long after its last update; writes
// keep its elements.
type Set struct {
	Name     string
	Type     KeyType
	Elements []Key
	Timeout  time.Duration
}

// Map is a named verdict map.
type Map struct {
	Name     string
	Type     KeyType
	Elements []MapElement
}

// MapElement maps a key to a verdict.
type MapElement struct {
	Key     Key
	Verdict Verdict
}

// Hook attaches a base chain to a netfilter hook.
type Hook struct {
	Type     string // "nat" or "filter"
	Hook     string // "prerouting", "input", "forward", "output", "postrouting"
	Priority int
}

// Chain is a chain of rules; base chains carry a Hook.
type Chain struct {
	Name  string
	Hook  *Hook
	Rules []Rule
}

// Rule is a list of statements: matches, then at most one action.
type Rule []Stmt

// Stmt is one statement of a rule. The concrete types below are the whole
// vocabulary; apply.go translates each into netlink expressions.
type Stmt interface{ String() string }

// VerdictKind says what a verdict does.
type VerdictKind int

// The verdicts rules and maps use.
const (
	Jump VerdictKind = iota
	Goto
	Drop
	Return
	Reject
)

// Verdict ends a rule or is a map's value. Chain is set for Jump and Goto.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

func (v Verdict) String() string {
	switch v.Kind {
	case Jump:
		return "jump " + v.Chain
	case Goto:
		return "goto " + v.Chain
	case Drop:
		return "drop"
	case Return:
		return "return"
	default:
		return "reject"
	}
}

// MatchAddr matches the source or destination address against one address, or, with
// Prefix bits under 32, against a prefix.
type MatchAddr struct {
	Source bool
	Prefix netip.Prefix
	Negate bool
}

func (m MatchAddr) String() string {
	dir := "daddr"
	if m.Source {
		dir = "saddr"
	}
	op := ""
	if m.Negate {
		op = "!= "
	}
	if m.Prefix.IsSingleIP() {
		return fmt.Sprintf("ip %s %s%s", dir, op, m.Prefix.Addr())
	}
	return fmt.Sprintf("ip %s %s%s", dir, op, m.Prefix)
}

// MatchDaddrSet matches destination addresses in a named set.
type MatchDaddrSet struct{ Set string }

func (m MatchDaddrSet) String() string { return "ip daddr @" + m.Set }

// MatchSaddrSet matches source addresses in a named set.
type MatchSaddrSet struct{ Set string }

func (m MatchSaddrSet) String() string { return "ip saddr @" + m.Set }

// UpdateSet adds the packet's source address to a set with timeouts, or refreshes it.
type UpdateSet struct{ Set string }

func (u UpdateSet) String() string { return "update @" + u.Set + " { ip saddr }" }

// MatchPort matches a transport protocol and destination port.
type MatchPort struct {
	Proto Protocol
	Port  uint16
}

func (m MatchPort) String() string { return fmt.Sprintf("%s dport %d", m.Proto, m.Port) }

// MatchProto matches a transport protocol.
type MatchProto struct{ Proto Protocol }

func (m MatchProto) String() string { return "meta l4proto " + m.Proto.String() }

// MatchFibLocal matches packets whose source (or destination) address is one of the
// node's own.
type MatchFibLocal struct{ Source bool }

func (m MatchFibLocal) String() string {
	if m.Source {
		return "fib saddr type local"
	}
	return "fib daddr type local"
}

// MatchCtNew matches the first packet of a connection.
type MatchCtNew struct{}

func (MatchCtNew) String() string { return "ct state new" }

// MatchMarkUnset matches packets without the masquerade bit.
type MatchMarkUnset struct{}

func (MatchMarkUnset) String() string { return fmt.Sprintf("meta mark & 0x%08x == 0", masqueradeBit) }

// SetMark sets the masquerade bit; ClearMark toggles it off again once seen.
type SetMark struct{}

func (SetMark) String() string { return fmt.Sprintf("meta mark set meta mark | 0x%08x", masqueradeBit) }

// ClearMark clears the masquerade bit (it is known to be set where this runs).
type ClearMark struct{}

func (ClearMark) String() string {
	return fmt.Sprintf("meta mark set meta mark ^ 0x%08x", masqueradeBit)
}

// Masquerade SNATs to the outgoing interface's address with random source ports.
type Masquerade struct{}

func (Masquerade) String() string { return "masquerade fully-random" }

// DNAT rewrites the destination to an endpoint.
type DNAT struct {
	Addr netip.Addr
	Port uint16
}

func (d DNAT) String() string { return fmt.Sprintf("dnat to %s:%d", d.Addr, d.Port) }

// VmapLookup looks the packet's key up in a named verdict map and applies the verdict
// found, if any.
type VmapLookup struct {
	Map  string
	Type KeyType
}

func (v VmapLookup) String() string {
	switch v.Type {
	case KeyProtoPort:
		return "meta l4proto . th dport vmap @" + v.Map
	case KeyAddrProtoPort:
		return "ip daddr . meta l4proto . th dport vmap @" + v.Map
	default:
		return "ip daddr vmap @" + v.Map
	}
}

// RandomGoto picks one of the chains uniformly at random for each new connection.
type RandomGoto struct{ Chains []string }

func (r RandomGoto) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "numgen random mod %d vmap {", len(r.Chains))
	for i, c := range r.Chains {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d : goto %s", i, c)
	}
	b.WriteString(" }")
	return b.String()
}

// String renders the ruleset in nft's syntax, one statement list per line.
func (rs *Ruleset) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", TableName)
	for _, s := range rs.Sets {
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype %s\n", s.Name, s.Type)
		if s.Timeout > 0 {
			fmt.Fprintf(&b, "\t\tflags dynamic,timeout\n\t\ttimeout %ds\n", int(s.Timeout.Seconds()))
		}
		if len(s.Elements) > 0 {
			elems := make([]string, len(s.Elements))
			for i, e := range s.Elements {
				elems[i] = e.format(s.Type)
			}
			fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(elems, ", "))
		}
		b.WriteString("\t}\n")
	}
	for _, m := range rs.Maps {
		fmt.Fprintf(&b, "\tmap %s {\n\t\ttype %s : verdict\n", m.Name, m.Type)
		if len(m.Elements) > 0 {
			b.WriteString("\t\telements = {\n")
			for _, e := range m.Elements {
				fmt.Fprintf(&b, "\t\t\t%s : %s,\n", e.Key.format(m.Type), e.Verdict)
			}
			b.WriteString("\t\t}\n")
		}
		b.WriteString("\t}\n")
	}
	for _, c := range rs.Chains {
		fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
		if c.Hook != nil {
			fmt.Fprintf(&b, "\t\ttype %s hook %s priority %d\n", c.Hook.Type, c.Hook.Hook, c.Hook.Priority)
		}
		for _, r := range c.Rules {
			parts := make([]string, len(r))
			for i, s := range r {
				parts[i] = s.String()
			}
			fmt.Fprintf(&b, "\t\t%s\n", strings.Join(parts, " "))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}
