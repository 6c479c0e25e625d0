package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Pods may set the safe sysctls and those the node allows; any other is refused at
// admission with upstream's SysctlForbidden, as is a network sysctl on the node's
// network; a pattern that is not namespaced does not start the kubelet.
func TestSysctlAdmission(t *testing.T) {
	h := newHarness(t)
	opts := h.options()
	opts.AllowedUnsafeSysctls = []string{"kernel.msg*", "net.core.somaxconn"}
	h.startWith(opts)
	withSysctls := func(name string, hostNetwork bool, sysctls ...v1.Sysctl) {
		p := newPod(name, "app")
		p.Spec.HostNetwork = hostNetwork
		p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: sysctls}
		h.createPod(p)
	}
	withSysctls("safe", false, v1.Sysctl{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}, v1.Sysctl{Name: "kernel/shm_rmid_forced", Value: "1"})
	withSysctls("allowed", false, v1.Sysctl{Name: "kernel.msgmax", Value: "10000"}, v1.Sysctl{Name: "net.core.somaxconn", Value: "1024"})
	withSysctls("unsafe", false, v1.Sysctl{Name: "kernel.sem", Value: "250 32000 100 128"})
	withSysctls("host-network", true, v1.Sysctl{Name: "net.ipv4.tcp_syncookies", Value: "1"})
	for _, name := range []string{"safe", "allowed"} {
		h.waitPod(name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}
	for name, want := range map[string]string{
		"unsafe":       `forbidden sysctl: "kernel.sem" not allowlisted`,
		"host-network": `forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host Net enabled`,
	} {
		p := h.waitPod(name, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != "SysctlForbidden" || p.Status.Message != want {
			t.Errorf("%s: reason %q message %q, want SysctlForbidden %q", name, p.Status.Reason, p.Status.Message, want)
		}
	}
	if _, err := newSysctlAllowlist([]string{"vm.swappiness"}); err == nil {
		t.Error("a sysctl the kernel does not namespace was allowed")
	}
}
