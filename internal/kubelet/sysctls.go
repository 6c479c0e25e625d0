package kubelet

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// safeSysctls are the sysctls every pod may set, as upstream's kubelet allows them:
// namespaced by the kernel (in the pod's IPC or network namespace) and harmless to the
// node and its other pods. Each is namespaced since kernel 4.15 or earlier.
var safeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
	"net.ipv4.tcp_slow_start_after_idle",
	"net.ipv4.tcp_notsent_lowat",
}

// sysctlAllowlist says which sysctls a pod may set on this node: the safe ones and the
// unsafe ones the node's operator allows (--allowed-unsafe-sysctls, names or prefixes
// ending in '*'), each in the namespace it belongs to.
type sysctlAllowlist struct {
	names    map[string]utilsysctl.Namespace
	prefixes map[string]utilsysctl.Namespace
}

// newSysctlAllowlist is the safe sysctls and the allowed unsafe patterns; a pattern
// the kernel does not namespace is an error, as upstream's kubelet refuses to start.
func newSysctlAllowlist(unsafe []string) (*sysctlAllowlist, error) {
	w := &sysctlAllowlist{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	for _, p := range append(append([]string(nil), safeSysctls...), unsafe...) {
		ns, nameOrPrefix, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
		}
		if prefixed {
			w.prefixes[nameOrPrefix] = ns
		} else {
			w.names[nameOrPrefix] = ns
		}
	}
	return w, nil
}

// admit refuses a pod that sets a sysctl not on the list, or one of a namespace the
// pod shares with the node (its network or IPC), with upstream's reason and words.
func (w *sysctlAllowlist) admit(pod *v1.Pod) (reason, message string) {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return "", ""
	}
	for _, s := range sc.Sysctls {
		if err := w.check(utilsysctl.NormalizeName(s.Name), pod); err != nil {
			return "SysctlForbidden", "forbidden sysctl: " + err.Error()
		}
	}
	return "", ""
}

func (w *sysctlAllowlist) check(name string, pod *v1.Pod) error {
	ns, ok := w.names[name]
	if !ok {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	if !ok {
		return fmt.Errorf("%q not allowlisted", name)
	}
	hostUsers := pod.Spec.HostUsers == nil || *pod.Spec.HostUsers
	if ns == utilsysctl.IPCNamespace && pod.Spec.HostIPC || ns == utilsysctl.NetNamespace && pod.Spec.HostNetwork ||
		ns == utilsysctl.UserNamespace && hostUsers {
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}
