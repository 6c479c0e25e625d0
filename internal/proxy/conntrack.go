package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"os"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
)

// Conntrack clears connection tracking entries that would keep UDP traffic flowing to
// endpoints the rules no longer name: UDP has no connection to break, so a client
// sending from one port keeps its first DNAT until the entry times out.
type Conntrack struct {
	// NetNS names a network namespace by an open fd (tests); zero is the process's.
	NetNS int
}

// ClearUDPTo deletes the UDP entries that were DNATed to one of the endpoints:
// the reply comes from the endpoint, the original destination was another address (a
// ClusterIP, a node's, an external IP). Direct traffic to the endpoint is left alone.
func (c Conntrack) ClearUDPTo(endpoints map[netip.AddrPort]bool) error {
	if len(endpoints) == 0 {
		return nil
	}
	conn, err := conntrack.Dial(&netlink.Config{NetNS: c.NetNS})
	if err != nil {
		return fmt.Errorf("conntrack: %w", err)
	}
	defer conn.Close()
	flows, err := conn.Dump(nil)
	if err != nil {
		return fmt.Errorf("conntrack: listing entries: %w", err)
	}
	var errs []error
	for _, f := range flows {
		if f.TupleOrig.Proto.Protocol != uint8(UDP) {
			continue
		}
		replyFrom := netip.AddrPortFrom(f.TupleReply.IP.SourceAddress, f.TupleReply.Proto.SourcePort)
		if !endpoints[replyFrom] || f.TupleOrig.IP.DestinationAddress == replyFrom.Addr() {
			continue
		}
		if err := conn.Delete(conntrack.Flow{TupleOrig: f.TupleOrig}); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// udpTargets are the endpoints a ruleset DNATs UDP traffic to.
func udpTargets(rs *Ruleset) map[netip.AddrPort]bool {
	out := map[netip.AddrPort]bool{}
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			udp := false
			for _, s := range r {
				switch s := s.(type) {
				case MatchProto:
					udp = s.Proto == UDP
				case DNAT:
					if udp {
						out[netip.AddrPortFrom(s.Addr, s.Port)] = true
					}
				}
			}
		}
	}
	return out
}
