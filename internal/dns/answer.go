package dns

import (
	"context"
	"net"
	"net/netip"

	miekg "github.com/miekg/dns"
)

// dnsSchemaVersion is the version of the Kubernetes DNS specification served at
// dns-version.<zone>, and that TXT record's TTL, as CoreDNS serves them.
const (
	dnsSchemaVersion = "1.1.0"
	dnsVersionTTL    = 28800
)

// The Service whose cluster IPs are the zone's nameserver address (ns.dns.<zone>), named
// as kubeadm names the cluster DNS service.
const (
	kubeDNSNamespace = "kube-system"
	kubeDNSName      = "kube-dns"
)

// maxCNAMEChase bounds how many CNAMEs an answer follows.
const maxCNAMEChase = 8

// answerCluster answers a question about a name in the cluster zone into reply. qname is
// the question's name in lower case; owner names in the answer keep the asker's case.
func (s *Server) answerCluster(ctx context.Context, reply *miekg.Msg, q miekg.Question, qname string, p parsedName) {
	reply.Authoritative = true
	exists := s.answerName(ctx, reply, q, qname, p, 0)
	switch {
	case !exists:
		reply.Rcode = miekg.RcodeNameError
		reply.Ns = append(reply.Ns, s.soa())
	case len(reply.Answer) == 0:
		reply.Ns = append(reply.Ns, s.soa())
	}
}

// answerName appends the records of one name to reply and says whether the name exists.
func (s *Server) answerName(ctx context.Context, reply *miekg.Msg, q miekg.Question, qname string, p parsedName, depth int) bool {
	owner := q.Name
	switch p.kind {
	case nameApex:
		switch q.Qtype {
		case miekg.TypeSOA:
			reply.Answer = append(reply.Answer, s.soa())
		case miekg.TypeNS:
			ns := "ns.dns." + s.zone
			reply.Answer = append(reply.Answer, &miekg.NS{Hdr: s.header(owner, miekg.TypeNS), Ns: ns})
			for _, a := range s.idx.clusterIPs(kubeDNSNamespace, kubeDNSName) {
				reply.Extra = append(reply.Extra, s.addrRecord(ns, a))
			}
		}
		return true
	case nameDNSVersion:
		if q.Qtype == miekg.TypeTXT {
			h := s.header(owner, miekg.TypeTXT)
			h.Ttl = dnsVersionTTL
			reply.Answer = append(reply.Answer, &miekg.TXT{Hdr: h, Txt: []string{dnsSchemaVersion}})
		}
		return true
	case nameNameserver:
		s.appendAddrs(reply, owner, q.Qtype, s.idx.clusterIPs(kubeDNSNamespace, kubeDNSName))
		return true
	case nameSvcRoot, namePodRoot:
		return true
	case nameSvcNamespace, namePodNamespace:
		return s.idx.namespaceExists(p.namespace)
	case namePod:
		a, ok := podAddr(p.first)
		if !ok || !s.idx.namespaceExists(p.namespace) {
			return false
		}
		s.appendAddrs(reply, owner, q.Qtype, []netip.Addr{a})
		return true
	case nameService:
		if !s.idx.namespaceExists(p.namespace) {
			return false
		}
		n := s.idx.lookup(p.key)
		if n == nil {
			return false
		}
		if n.cname != "" {
			s.answerCNAME(ctx, reply, q, n.cname, depth)
			return true
		}
		switch q.Qtype {
		case miekg.TypeA, miekg.TypeAAAA:
			s.appendAddrs(reply, owner, q.Qtype, n.addrs)
		case miekg.TypeSRV:
			s.appendSRV(reply, owner, n.srv)
		}
		return true
	}
	return false
}

// answerCNAME answers for an ExternalName service: the CNAME, then for A and AAAA the
// target's records, looked up in the zone or upstream. Like CoreDNS, other types get
// no data.
func (s *Server) answerCNAME(ctx context.Context, reply *miekg.Msg, q miekg.Question, target string, depth int) {
	switch q.Qtype {
	case miekg.TypeCNAME, miekg.TypeA, miekg.TypeAAAA:
	default:
		return
	}
	reply.Answer = append(reply.Answer, &miekg.CNAME{Hdr: s.header(q.Name, miekg.TypeCNAME), Target: target})
	if q.Qtype == miekg.TypeCNAME || depth >= maxCNAMEChase {
		return
	}
	next := miekg.Question{Name: target, Qtype: q.Qtype, Qclass: q.Qclass}
	if p, ok := parseName(target, s.zone); ok {
		s.answerName(ctx, reply, next, target, p, depth+1)
		return
	}
	up := new(miekg.Msg)
	up.SetQuestion(target, q.Qtype)
	resp, err := s.fwd.exchange(ctx, up)
	if err != nil {
		s.log.Debug("resolving an ExternalName target upstream failed", "target", target, "err", err)
		return
	}
	reply.Answer = append(reply.Answer, resp.Answer...)
}

// answerPTR answers a reverse lookup of a cluster address; false leaves it to upstream.
func (s *Server) answerPTR(reply *miekg.Msg, q miekg.Question, qname string) bool {
	a, ok := addrFromReverse(qname)
	if !ok {
		return false
	}
	targets := s.idx.ptrTargets(a)
	if len(targets) == 0 {
		return false
	}
	reply.Authoritative = true
	for _, t := range targets {
		reply.Answer = append(reply.Answer, &miekg.PTR{Hdr: s.header(q.Name, miekg.TypePTR), Ptr: t})
	}
	return true
}

// appendAddrs appends the addresses of the asked family as A or AAAA records.
func (s *Server) appendAddrs(reply *miekg.Msg, owner string, qtype uint16, addrs []netip.Addr) {
	for _, a := range addrs {
		if (qtype == miekg.TypeA && a.Is4()) || (qtype == miekg.TypeAAAA && !a.Is4()) {
			reply.Answer = append(reply.Answer, s.addrRecord(owner, a))
		}
	}
}

// appendSRV appends SRV records with CoreDNS's weights (equal shares of 100 at priority 0)
// and the targets' addresses in the additional section.
func (s *Server) appendSRV(reply *miekg.Msg, owner string, records []srvRecord) {
	if len(records) == 0 {
		return
	}
	weight := uint16(100 / len(records))
	lastTarget := ""
	for _, r := range records {
		reply.Answer = append(reply.Answer, &miekg.SRV{
			Hdr: s.header(owner, miekg.TypeSRV), Priority: 0, Weight: weight, Port: r.port, Target: r.target,
		})
		if r.target == lastTarget { // records are sorted by target: add its addresses once
			continue
		}
		lastTarget = r.target
		if n := s.idx.lookup(r.target); n != nil {
			for _, a := range n.addrs {
				reply.Extra = append(reply.Extra, s.addrRecord(r.target, a))
			}
		}
	}
}

func (s *Server) addrRecord(owner string, a netip.Addr) miekg.RR {
	if a.Is4() {
		b := a.As4()
		return &miekg.A{Hdr: s.header(owner, miekg.TypeA), A: net.IP(b[:])}
	}
	b := a.As16()
	return &miekg.AAAA{Hdr: s.header(owner, miekg.TypeAAAA), AAAA: net.IP(b[:])}
}

func (s *Server) header(owner string, rrtype uint16) miekg.RR_Header {
	return miekg.RR_Header{Name: owner, Rrtype: rrtype, Class: miekg.ClassINET, Ttl: s.ttl}
}

// soa is the zone's SOA record, as CoreDNS writes it: the negative-caching TTL is the
// record TTL.
func (s *Server) soa() *miekg.SOA {
	return &miekg.SOA{
		Hdr:     s.header(s.zone, miekg.TypeSOA),
		Ns:      "ns.dns." + s.zone,
		Mbox:    "hostmaster." + s.zone,
		Serial:  s.idx.soaSerial(),
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  s.ttl,
	}
}
