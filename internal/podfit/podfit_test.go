package podfit

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A port taken on one address conflicts with the same port and protocol on that
// address or on every address (an empty hostIP or 0.0.0.0), and with nothing else.
func TestCheckConflict(t *testing.T) {
	port := func(ip string, proto v1.Protocol, n int32) v1.ContainerPort {
		return v1.ContainerPort{HostIP: ip, Protocol: proto, HostPort: n}
	}
	for _, c := range []struct {
		a, b v1.ContainerPort
		want bool
	}{
		{port("", "", 80), port("0.0.0.0", v1.ProtocolTCP, 80), true},
		{port("10.0.0.1", "", 80), port("", "", 80), true},
		{port("", "", 80), port("10.0.0.1", "", 80), true},
		{port("10.0.0.1", "", 80), port("10.0.0.2", "", 80), false},
		{port("10.0.0.1", "", 80), port("10.0.0.1", "", 80), true},
		{port("", v1.ProtocolTCP, 80), port("", v1.ProtocolUDP, 80), false},
		{port("", "", 80), port("", "", 81), false},
	} {
		used := HostPortInfo{}
		used.Add(c.a.HostIP, string(c.a.Protocol), c.a.HostPort)
		if got := used.CheckConflict(c.b.HostIP, string(c.b.Protocol), c.b.HostPort); got != c.want {
			t.Errorf("%+v taken, CheckConflict(%+v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestIsExtendedResourceName(t *testing.T) {
	for name, want := range map[v1.ResourceName]bool{
		"example.com/foo": true, "scheduling.k8s.io/foo": true,
		"cpu": false, "kubernetes.io/foo": false, "node.kubernetes.io/foo": false, "requests.example.com/foo": false, "/foo": false,
	} {
		if got := IsExtendedResourceName(name); got != want {
			t.Errorf("IsExtendedResourceName(%q) = %v, want %v", name, got, want)
		}
	}
}
