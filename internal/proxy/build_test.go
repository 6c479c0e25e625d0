package proxy

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestBuild runs the scenarios in testdata/: services and endpoints in, rules out.
//
//	node name=N [cluster-cidr=C] [nodeport-addresses=(A,...)] [masquerade-all]
//	service name=NS/NAME [type=T] [cluster-ip=IP] ports=(NAME:PROTO:PORT[:NODEPORT],...)
//	        [itp=Local] [etp=Local] [external-ips=(IP,...)] [lb-ips=(IP,...)]
//	        [source-ranges=(CIDR,...)] [affinity=SECONDS]   (sessionAffinity ClientIP; 0 for the default timeout)
//	endpoints service=NS/NAME [slice=S] ports=(NAME:PROTO:PORT,...)
//	  IP [node=N] [not-ready] [terminating] [not-serving]     (one endpoint a line)
//	delete service=NS/NAME | slice=NS/S
//	rules [full]      the ruleset; without full, only the service-specific parts
func TestBuild(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		in := Input{}
		services := map[string]*v1.Service{}
		slices := map[string]*discoveryv1.EndpointSlice{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "node":
				in = Input{Services: in.Services, EndpointSlices: in.EndpointSlices}
				for _, a := range d.CmdArgs {
					switch a.Key {
					case "name":
						in.NodeName = a.Vals[0]
					case "cluster-cidr":
						in.ClusterCIDR = netip.MustParsePrefix(a.Vals[0])
					case "nodeport-addresses":
						for _, v := range a.Vals {
							if v == "all" {
								in.NodePortOnAllLocal = true
							} else {
								in.NodePortAddresses = append(in.NodePortAddresses, netip.MustParseAddr(v))
							}
						}
					case "masquerade-all":
						in.MasqueradeAll = true
					default:
						d.Fatalf(t, "unknown argument %s", a.Key)
					}
				}
			case "service":
				svc := parseService(t, d)
				services[svc.Namespace+"/"+svc.Name] = svc
			case "endpoints":
				s := parseSlice(t, d)
				slices[s.Namespace+"/"+s.Name] = s
			case "delete":
				for _, a := range d.CmdArgs {
					if a.Key == "service" {
						delete(services, a.Vals[0])
					} else {
						delete(slices, a.Vals[0])
					}
				}
			case "rules":
				in.Services, in.EndpointSlices = nil, nil
				for _, k := range sortedKeys(services) {
					in.Services = append(in.Services, services[k])
				}
				// Slices in reverse order: the output must not depend on input order.
				keys := sortedKeys(slices)
				for i := len(keys) - 1; i >= 0; i-- {
					in.EndpointSlices = append(in.EndpointSlices, slices[keys[i]])
				}
				rs := Build(in)
				if d.HasArg("full") {
					return rs.String()
				}
				return serviceParts(rs)
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return ""
		})
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// serviceParts renders what depends on the services: the sets' and maps' elements and
// the per-service chains, leaving out the fixed skeleton.
func serviceParts(rs *Ruleset) string {
	fixed := map[string]bool{}
	for _, c := range Build(Input{}).Chains {
		fixed[c.Name] = true
	}
	var b strings.Builder
	for _, s := range rs.Sets {
		if s.Timeout > 0 {
			fmt.Fprintf(&b, "set %s: timeout %s\n", s.Name, s.Timeout)
		}
		if len(s.Elements) == 0 {
			continue
		}
		elems := make([]string, len(s.Elements))
		for i, e := range s.Elements {
			elems[i] = e.format(s.Type)
		}
		fmt.Fprintf(&b, "set %s: %s\n", s.Name, strings.Join(elems, ", "))
	}
	for _, m := range rs.Maps {
		for _, e := range m.Elements {
			fmt.Fprintf(&b, "map %s: %s : %s\n", m.Name, e.Key.format(m.Type), e.Verdict)
		}
	}
	for _, c := range rs.Chains {
		if fixed[c.Name] {
			continue
		}
		fmt.Fprintf(&b, "chain %s\n", c.Name)
		for _, r := range c.Rules {
			parts := make([]string, len(r))
			for i, s := range r {
				parts[i] = s.String()
			}
			fmt.Fprintf(&b, "  %s\n", strings.Join(parts, " "))
		}
	}
	return b.String()
}

func splitNS(t *testing.T, d *datadriven.TestData, s string) (string, string) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		d.Fatalf(t, "%q is not namespace/name", s)
	}
	return ns, name
}

func parseProto(t *testing.T, d *datadriven.TestData, s string) v1.Protocol {
	switch s {
	case "tcp":
		return v1.ProtocolTCP
	case "udp":
		return v1.ProtocolUDP
	case "sctp":
		return v1.ProtocolSCTP
	case "-":
		return ""
	}
	d.Fatalf(t, "unknown protocol %q", s)
	return ""
}

func atoi32(t *testing.T, d *datadriven.TestData, s string) int32 {
	n, err := strconv.Atoi(s)
	if err != nil {
		d.Fatalf(t, "%q: %v", s, err)
	}
	return int32(n)
}

func parseService(t *testing.T, d *datadriven.TestData) *v1.Service {
	svc := &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}}
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "name":
			svc.Namespace, svc.Name = splitNS(t, d, a.Vals[0])
		case "type":
			svc.Spec.Type = v1.ServiceType(a.Vals[0])
		case "cluster-ip":
			svc.Spec.ClusterIP = a.Vals[0]
		case "ports":
			for _, v := range a.Vals {
				f := strings.Split(v, ":")
				p := v1.ServicePort{Name: f[0], Protocol: parseProto(t, d, f[1]), Port: atoi32(t, d, f[2])}
				if len(f) > 3 {
					p.NodePort = atoi32(t, d, f[3])
				}
				svc.Spec.Ports = append(svc.Spec.Ports, p)
			}
		case "itp":
			p := v1.ServiceInternalTrafficPolicy(a.Vals[0])
			svc.Spec.InternalTrafficPolicy = &p
		case "etp":
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicy(a.Vals[0])
		case "external-ips":
			svc.Spec.ExternalIPs = a.Vals
		case "affinity":
			svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			if secs := atoi32(t, d, a.Vals[0]); secs > 0 {
				svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: &secs}}
			}
		case "source-ranges":
			svc.Spec.LoadBalancerSourceRanges = a.Vals
		case "lb-ips":
			for _, ip := range a.Vals {
				svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
			}
		default:
			d.Fatalf(t, "unknown argument %s", a.Key)
		}
	}
	return svc
}

func parseSlice(t *testing.T, d *datadriven.TestData) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	var service, sliceName string
	for _, a := range d.CmdArgs {
		switch a.Key {
		case "service":
			service = a.Vals[0]
		case "slice":
			sliceName = a.Vals[0]
		case "address-type":
			s.AddressType = discoveryv1.AddressType(a.Vals[0])
		case "ports":
			for _, v := range a.Vals {
				f := strings.Split(v, ":")
				p := discoveryv1.EndpointPort{Name: ptr(f[0]), Port: ptr(atoi32(t, d, f[2]))}
				if proto := parseProto(t, d, f[1]); proto != "" {
					p.Protocol = &proto
				}
				s.Ports = append(s.Ports, p)
			}
		default:
			d.Fatalf(t, "unknown argument %s", a.Key)
		}
	}
	ns, name := splitNS(t, d, service)
	if sliceName == "" {
		sliceName = name + "-1"
	}
	s.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: sliceName, Labels: map[string]string{discoveryv1.LabelServiceName: name}}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		ep := discoveryv1.Endpoint{Addresses: []string{f[0]}}
		ready, serving := true, (*bool)(nil)
		for _, attr := range f[1:] {
			switch {
			case strings.HasPrefix(attr, "node="):
				ep.NodeName = ptr(strings.TrimPrefix(attr, "node="))
			case attr == "not-ready":
				ready = false
			case attr == "terminating":
				ep.Conditions.Terminating = ptr(true)
			case attr == "serving":
				serving = ptr(true)
			case attr == "not-serving":
				serving = ptr(false)
			default:
				d.Fatalf(t, "unknown endpoint attribute %q", attr)
			}
		}
		ep.Conditions.Ready, ep.Conditions.Serving = ptr(ready), serving
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}
