package dns

import (
	"net/netip"
	"strconv"
	"strings"
)

// nameKind says what part of the cluster zone's naming scheme a query name falls in.
type nameKind int

const (
	// nameInvalid is a name under the zone that the scheme can never hold (NXDOMAIN).
	nameInvalid      nameKind = iota
	nameApex                  // <zone>
	nameDNSVersion            // dns-version.<zone>
	nameNameserver            // ns.dns.<zone>
	nameSvcRoot               // svc.<zone>
	namePodRoot               // pod.<zone>
	nameSvcNamespace          // <ns>.svc.<zone>
	namePodNamespace          // <ns>.pod.<zone>
	nameService               // <svc>.<ns>.svc.<zone>, <ep>.<svc>.<ns>.svc.<zone>, _<port>._<proto>.<svc>.<ns>.svc.<zone>
	namePod                   // <ip-dashed>.<ns>.pod.<zone>
)

// parsedName is a query name split along the cluster naming scheme.
type parsedName struct {
	kind      nameKind
	namespace string
	// first is the service name, or the dashed address of a pod.
	first string
	// key is the name to look up in the index for nameService: qname itself, but with
	// the underscores of an SRV name's port and protocol labels put back when left out.
	key string
}

// parseName splits qname, a lower-case fully qualified name, along the naming scheme of
// zone (lower-case, fully qualified, not the root). ok is false when qname is not inside zone.
// Service names are only classified here: the index knows which of them exist.
func parseName(qname, zone string) (p parsedName, ok bool) {
	if qname == zone {
		return parsedName{kind: nameApex}, true
	}
	if !strings.HasSuffix(qname, "."+zone) {
		return parsedName{}, false
	}
	base := strings.TrimSuffix(qname, zone)
	base = strings.TrimSuffix(base, ".")
	// Kubernetes names never hold escapes; a name with one cannot match anything.
	if base == "" || strings.ContainsRune(base, '\\') {
		return parsedName{kind: nameInvalid}, true
	}

	// Peel at most five labels off the right; anything longer is invalid.
	var labels [5]string
	n := 0
	rest := base
	for rest != "" {
		if n == len(labels) {
			return parsedName{kind: nameInvalid}, true
		}
		i := strings.LastIndexByte(rest, '.')
		labels[n] = rest[i+1:]
		if labels[n] == "" {
			return parsedName{kind: nameInvalid}, true
		}
		n++
		if i < 0 {
			break
		}
		rest = rest[:i]
		if rest == "" { // a leading dot: an empty label
			return parsedName{kind: nameInvalid}, true
		}
	}

	switch labels[0] {
	case "dns-version":
		if n == 1 {
			return parsedName{kind: nameDNSVersion}, true
		}
	case "dns":
		if n == 2 && labels[1] == "ns" {
			return parsedName{kind: nameNameserver}, true
		}
	case "svc":
		switch n {
		case 1:
			return parsedName{kind: nameSvcRoot}, true
		case 2:
			return parsedName{kind: nameSvcNamespace, namespace: labels[1]}, true
		default:
			p := parsedName{kind: nameService, namespace: labels[1], first: labels[2], key: qname}
			if n == 5 && (labels[3][0] != '_' || labels[4][0] != '_') {
				p.key = "_" + stripUnderscore(labels[4]) + "._" + stripUnderscore(labels[3]) + "." +
					labels[2] + "." + labels[1] + ".svc." + zone
			}
			return p, true
		}
	case "pod":
		switch n {
		case 1:
			return parsedName{kind: namePodRoot}, true
		case 2:
			return parsedName{kind: namePodNamespace, namespace: labels[1]}, true
		case 3:
			return parsedName{kind: namePod, namespace: labels[1], first: labels[2]}, true
		}
	}
	return parsedName{kind: nameInvalid}, true
}

// podAddr reads the address of a pod name label: "10-1-2-3" for 10.1.2.3, and the
// colons of an IPv6 address written as dashes ("fd00--1" for fd00::1), as CoreDNS does.
func podAddr(label string) (netip.Addr, bool) {
	if strings.ContainsAny(label, ".:") {
		return netip.Addr{}, false
	}
	var text string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		text = strings.ReplaceAll(label, "-", ".")
	} else {
		text = strings.ReplaceAll(label, "-", ":")
	}
	a, err := netip.ParseAddr(text)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a, true
}

// dashedAddr writes an address as one DNS label: dots (IPv4) or colons (IPv6) become dashes.
// It names endpoints without a hostname.
func dashedAddr(a netip.Addr) string {
	s := a.String()
	if a.Is4() {
		return strings.ReplaceAll(s, ".", "-")
	}
	return strings.ReplaceAll(s, ":", "-")
}

const (
	reverseV4Zone = "in-addr.arpa."
	reverseV6Zone = "ip6.arpa."
)

// isReverseName says whether qname (lower-case, fully qualified) is under a reverse zone.
func isReverseName(qname string) bool {
	return qname == reverseV4Zone || qname == reverseV6Zone ||
		strings.HasSuffix(qname, "."+reverseV4Zone) || strings.HasSuffix(qname, "."+reverseV6Zone)
}

// addrFromReverse reads the address a full PTR name stands for: "4.3.2.1.in-addr.arpa."
// for 1.2.3.4, or the 32 nibbles of an ip6.arpa name. Partial names give false.
func addrFromReverse(qname string) (netip.Addr, bool) {
	if rest, ok := strings.CutSuffix(qname, "."+reverseV4Zone); ok {
		var b [4]byte
		for i := 3; i >= 0; i-- {
			label := rest
			if i > 0 {
				var found bool
				label, rest, found = strings.Cut(rest, ".")
				if !found {
					return netip.Addr{}, false
				}
			}
			// Reverse labels are plain decimal octets without leading zeros.
			if label == "" || len(label) > 3 || (len(label) > 1 && label[0] == '0') {
				return netip.Addr{}, false
			}
			v, err := strconv.ParseUint(label, 10, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			b[i] = byte(v)
		}
		return netip.AddrFrom4(b), true
	}
	if rest, ok := strings.CutSuffix(qname, "."+reverseV6Zone); ok {
		// 32 nibbles, each a single hex digit followed by a dot (but the last).
		if len(rest) != 63 {
			return netip.Addr{}, false
		}
		var b [16]byte
		for i := range 32 {
			c := rest[2*i]
			if i < 31 && rest[2*i+1] != '.' {
				return netip.Addr{}, false
			}
			v, ok := hexNibble(c)
			if !ok {
				return netip.Addr{}, false
			}
			pos := 31 - i // the first label is the last nibble
			if pos%2 == 0 {
				b[pos/2] |= v << 4
			} else {
				b[pos/2] |= v
			}
		}
		return netip.AddrFrom16(b), true
	}
	return netip.Addr{}, false
}

func hexNibble(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// stripUnderscore drops the leading underscore of an SRV port or protocol label; CoreDNS
// accepts both forms.
func stripUnderscore(s string) string { return strings.TrimPrefix(s, "_") }
