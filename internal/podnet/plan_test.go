package podnet

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testNode(name, cidr, ip string, annotations map[string]string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Spec: v1.NodeSpec{PodCIDR: cidr}}
	if ip != "" {
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: name}, {Type: v1.NodeInternalIP, Address: ip}}
	}
	return n
}

func vxlanAnnotations(mac, ip string) map[string]string {
	return map[string]string{AnnotationBackend: "vxlan", AnnotationVTEPMAC: mac, AnnotationPublicIP: ip}
}

func TestMakePlan(t *testing.T) {
	onLAN := func(ip netip.Addr) bool { return netip.MustParsePrefix("192.168.1.0/24").Contains(ip) }
	nodes := []*v1.Node{
		testNode("me", "10.244.0.0/24", "192.168.1.2", vxlanAnnotations("aa:bb:cc:00:00:01", "192.168.1.2")),
		testNode("b", "10.244.1.0/24", "192.168.1.3", vxlanAnnotations("aa:bb:cc:00:00:02", "192.168.1.3")),
		testNode("far", "10.244.2.0/24", "10.9.0.4", vxlanAnnotations("aa:bb:cc:00:00:03", "10.9.0.4")),
		testNode("joining", "", "192.168.1.5", nil),
		testNode("unpublished", "10.244.4.0/24", "192.168.1.6", nil),
		testNode("routed", "10.244.5.0/24", "192.168.1.7", map[string]string{AnnotationBackend: "host-gw"}),
		testNode("beside-me", "10.244.6.0/24", "192.168.1.2", vxlanAnnotations("aa:bb:cc:00:00:06", "192.168.1.2")),
	}
	for _, tc := range []struct {
		mode         Mode
		peers        []string
		problemsWith []string
	}{
		// vxlan reaches every node that published its endpoint, across subnets too; a
		// node of another backend is a problem, one not yet published is not, and one on
		// this machine needs nothing.
		{VXLAN, []string{"b", "far"}, []string{"routed"}},
		// host-gw reaches only the nodes on a connected network.
		{HostGW, []string{"b", "routed", "unpublished"}, []string{"far"}},
	} {
		p := makePlan(tc.mode, "me", netip.MustParseAddr("192.168.1.2"), nodes, onLAN)
		if p.Others != 4 {
			t.Errorf("%s: %d other machines' nodes, want 4 (not the one joining, nor the one beside me)", tc.mode, p.Others)
		}
		var names []string
		for _, pe := range p.Peers {
			names = append(names, pe.Name)
		}
		if strings.Join(names, ",") != strings.Join(tc.peers, ",") {
			t.Errorf("%s: peers %v, want %v", tc.mode, names, tc.peers)
		}
		if len(p.Problems) != len(tc.problemsWith) {
			t.Errorf("%s: problems %q, want one about each of %v", tc.mode, p.Problems, tc.problemsWith)
			continue
		}
		for i, name := range tc.problemsWith {
			if !strings.Contains(p.Problems[i], "node "+name+" ") {
				t.Errorf("%s: problem %q, want one about %s", tc.mode, p.Problems[i], name)
			}
		}
	}
	p := makePlan(VXLAN, "me", netip.MustParseAddr("192.168.1.2"), nodes, onLAN)
	if b := p.Peers[0]; b.VTEPMAC.String() != "aa:bb:cc:00:00:02" || b.PublicIP.String() != "192.168.1.3" || b.PodCIDR.String() != "10.244.1.0/24" {
		t.Errorf("peer b = %+v", b)
	}
}

func TestParseModeAndDeviceName(t *testing.T) {
	for _, s := range []string{"vxlan", "host-gw", "none"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("flannel"); err == nil {
		t.Error("ParseMode accepted flannel")
	}
	if got := DeviceName("mzn-svcproxy-long"); len(got) > 15 || got != "mzn-svcproxy.vx" {
		t.Errorf("DeviceName = %q", got)
	}
	if got := DeviceName(""); got != "mizzen0.vx" {
		t.Errorf("DeviceName default = %q", got)
	}
}
