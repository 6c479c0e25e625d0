package podsecurity

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Level is a Pod Security Standard.
type Level string

const (
	Privileged Level = "privileged"
	Baseline   Level = "baseline"
	Restricted Level = "restricted"
)

// violation is one failed check: upstream's reason and detail.
type violation struct{ reason, detail string }

// container is one container of any kind with where it is.
type container struct {
	name string
	sc   *corev1.SecurityContext
	c    *corev1.Container
}

func containers(spec *corev1.PodSpec) []container {
	var out []container
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		out = append(out, container{c.Name, c.SecurityContext, c})
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		out = append(out, container{c.Name, c.SecurityContext, c})
	}
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i]
		cc := corev1.Container(c.EphemeralContainerCommon)
		out = append(out, container{c.Name, c.SecurityContext, &cc})
	}
	return out
}

// quoted lists names as upstream's messages do: "a", "b".
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// plural is "container" or "containers" followed by the quoted names.
func plural(singular, pluralWord string, names []string) string {
	if len(names) == 1 {
		return singular + " " + quoted(names)
	}
	return pluralWord + " " + quoted(names)
}

// check evaluates a pod spec (with its metadata) against a level.
func check(level Level, meta *podMeta, spec *corev1.PodSpec) []violation {
	if level == Privileged {
		return nil
	}
	var out []violation
	add := func(v *violation) {
		if v != nil {
			out = append(out, *v)
		}
	}
	all := containers(spec)
	restricted := level == Restricted
	// In upstream's order, that of the checks' IDs; the restricted checks of
	// capabilities, volumes and seccomp replace the baseline ones.
	if restricted {
		add(privilegeEscalation(spec, all))
	}
	add(appArmor(meta, spec, all))
	if restricted {
		add(restrictedCapabilities(all))
	} else {
		add(baselineCapabilities(all))
	}
	add(hostNamespaces(spec))
	if !restricted {
		add(hostPathVolumes(spec))
	}
	add(hostPorts(all))
	add(probeHosts(all))
	add(windowsHostProcess(spec, all))
	add(privileged(all))
	add(procMount(all))
	if restricted {
		add(volumeTypes(spec))
		add(runAsNonRoot(spec, all))
		add(runAsUser(spec, all))
	}
	add(seLinux(spec, all))
	if restricted {
		add(seccompRestricted(spec, all))
	} else {
		add(seccompBaseline(spec, all))
	}
	add(sysctls(spec))
	return out
}

func hostNamespaces(spec *corev1.PodSpec) *violation {
	var set []string
	if spec.HostNetwork {
		set = append(set, "hostNetwork=true")
	}
	if spec.HostPID {
		set = append(set, "hostPID=true")
	}
	if spec.HostIPC {
		set = append(set, "hostIPC=true")
	}
	if len(set) == 0 {
		return nil
	}
	return &violation{"host namespaces", strings.Join(set, ", ")}
}

func privileged(all []container) *violation {
	var bad []string
	for _, c := range all {
		if c.sc != nil && c.sc.Privileged != nil && *c.sc.Privileged {
			bad = append(bad, c.name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &violation{"privileged", plural("container", "containers", bad) + " must not set securityContext.privileged=true"}
}

var baselineCaps = map[corev1.Capability]bool{"AUDIT_WRITE": true, "CHOWN": true, "DAC_OVERRIDE": true, "FOWNER": true, "FSETID": true,
	"KILL": true, "MKNOD": true, "NET_BIND_SERVICE": true, "SETFCAP": true, "SETGID": true, "SETPCAP": true, "SETUID": true, "SYS_CHROOT": true}

func baselineCapabilities(all []container) *violation {
	var names []string
	caps := map[string]bool{}
	for _, c := range all {
		if c.sc == nil || c.sc.Capabilities == nil {
			continue
		}
		found := false
		for _, cap := range c.sc.Capabilities.Add {
			if !baselineCaps[cap] {
				found = true
				caps[string(cap)] = true
			}
		}
		if found {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &violation{"non-default capabilities", plural("container", "containers", names) + " must not include " + quoted(sortedKeys(caps)) + " in securityContext.capabilities.add"}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func hostPathVolumes(spec *corev1.PodSpec) *violation {
	var names []string
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &violation{"hostPath volumes", plural("volume", "volumes", names)}
}

func hostPorts(all []container) *violation {
	var names, ports []string
	for _, c := range all {
		found := false
		for _, p := range c.c.Ports {
			if p.HostPort != 0 {
				found = true
				ports = append(ports, fmt.Sprint(p.HostPort))
			}
		}
		if found {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	word := "hostPort"
	if len(ports) > 1 {
		word = "hostPorts"
	}
	return &violation{"hostPort", plural("container", "containers", names) + " uses " + word + " " + strings.Join(ports, ", ")}
}

func appArmor(meta *podMeta, spec *corev1.PodSpec, all []container) *violation {
	var bad []string
	okType := func(t corev1.AppArmorProfileType) bool {
		return t == corev1.AppArmorProfileTypeRuntimeDefault || t == corev1.AppArmorProfileTypeLocalhost
	}
	if sc := spec.SecurityContext; sc != nil && sc.AppArmorProfile != nil && !okType(sc.AppArmorProfile.Type) {
		bad = append(bad, fmt.Sprintf("pod must not set securityContext.appArmorProfile.type to %q", sc.AppArmorProfile.Type))
	}
	for _, c := range all {
		if c.sc != nil && c.sc.AppArmorProfile != nil && !okType(c.sc.AppArmorProfile.Type) {
			bad = append(bad, fmt.Sprintf("container %q must not set securityContext.appArmorProfile.type to %q", c.name, c.sc.AppArmorProfile.Type))
		}
	}
	var keys []string
	for k, v := range meta.annotations {
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != corev1.DeprecatedAppArmorBetaProfileRuntimeDefault && !strings.HasPrefix(v, corev1.DeprecatedAppArmorBetaProfileNamePrefix) {
			keys = append(keys, fmt.Sprintf("%s=%q", k, v))
		}
	}
	sort.Strings(keys)
	bad = append(bad, keys...)
	if len(bad) == 0 {
		return nil
	}
	return &violation{"forbidden AppArmor profile", strings.Join(bad, ", ")}
}

var seLinuxTypes = map[string]bool{"": true, "container_t": true, "container_init_t": true, "container_kvm_t": true, "container_engine_t": true}

func seLinux(spec *corev1.PodSpec, all []container) *violation {
	var bad []string
	checkOpts := func(o *corev1.SELinuxOptions, who string) {
		if o == nil {
			return
		}
		var fields []string
		if !seLinuxTypes[o.Type] {
			fields = append(fields, fmt.Sprintf("type=%q", o.Type))
		}
		if o.User != "" {
			fields = append(fields, fmt.Sprintf("user=%q", o.User))
		}
		if o.Role != "" {
			fields = append(fields, fmt.Sprintf("role=%q", o.Role))
		}
		if len(fields) > 0 {
			bad = append(bad, who+" set forbidden securityContext.seLinuxOptions: "+strings.Join(fields, ", "))
		}
	}
	if spec.SecurityContext != nil {
		checkOpts(spec.SecurityContext.SELinuxOptions, "pod")
	}
	for _, c := range all {
		if c.sc != nil {
			checkOpts(c.sc.SELinuxOptions, fmt.Sprintf("container %q", c.name))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &violation{"seLinuxOptions", strings.Join(bad, "; ")}
}

func procMount(all []container) *violation {
	var names []string
	for _, c := range all {
		if c.sc != nil && c.sc.ProcMount != nil && *c.sc.ProcMount != corev1.DefaultProcMount {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &violation{"procMount", plural("container", "containers", names) + " must not set securityContext.procMount to \"Unmasked\""}
}

func seccompBaseline(spec *corev1.PodSpec, all []container) *violation {
	var bad []string
	if sc := spec.SecurityContext; sc != nil && sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
		bad = append(bad, `pod must not set securityContext.seccompProfile.type to "Unconfined"`)
	}
	var names []string
	for _, c := range all {
		if c.sc != nil && c.sc.SeccompProfile != nil && c.sc.SeccompProfile.Type == corev1.SeccompProfileTypeUnconfined {
			names = append(names, c.name)
		}
	}
	if len(names) > 0 {
		bad = append(bad, plural("container", "containers", names)+` must not set securityContext.seccompProfile.type to "Unconfined"`)
	}
	if len(bad) == 0 {
		return nil
	}
	return &violation{"seccompProfile", strings.Join(bad, "; ")}
}

var safeSysctls = map[string]bool{"kernel.shm_rmid_forced": true, "net.ipv4.ip_local_port_range": true, "net.ipv4.ip_unprivileged_port_start": true,
	"net.ipv4.tcp_syncookies": true, "net.ipv4.ping_group_range": true, "net.ipv4.ip_local_reserved_ports": true, "net.ipv4.tcp_keepalive_time": true,
	"net.ipv4.tcp_fin_timeout": true, "net.ipv4.tcp_keepalive_intvl": true, "net.ipv4.tcp_keepalive_probes": true,
	"net.ipv4.tcp_rmem": true, "net.ipv4.tcp_wmem": true}

func sysctls(spec *corev1.PodSpec) *violation {
	if spec.SecurityContext == nil {
		return nil
	}
	var bad []string
	for _, s := range spec.SecurityContext.Sysctls {
		if !safeSysctls[s.Name] {
			bad = append(bad, s.Name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &violation{"forbidden sysctls", strings.Join(bad, ", ")}
}

func windowsHostProcess(spec *corev1.PodSpec, all []container) *violation {
	hp := func(o *corev1.WindowsSecurityContextOptions) bool {
		return o != nil && o.HostProcess != nil && *o.HostProcess
	}
	var bad []string
	if spec.SecurityContext != nil && hp(spec.SecurityContext.WindowsOptions) {
		bad = append(bad, "pod")
	}
	var names []string
	for _, c := range all {
		if c.sc != nil && hp(c.sc.WindowsOptions) {
			names = append(names, c.name)
		}
	}
	if len(names) > 0 {
		bad = append(bad, plural("container", "containers", names))
	}
	if len(bad) == 0 {
		return nil
	}
	return &violation{"hostProcess", strings.Join(bad, " and ") + " must not set securityContext.windowsOptions.hostProcess=true"}
}

func probeHosts(all []container) *violation {
	var names []string
	for _, c := range all {
		bad := false
		for _, h := range []*corev1.ProbeHandler{probeHandler(c.c.LivenessProbe), probeHandler(c.c.ReadinessProbe), probeHandler(c.c.StartupProbe)} {
			if h != nil && ((h.HTTPGet != nil && h.HTTPGet.Host != "" && h.HTTPGet.Host != "127.0.0.1" && h.HTTPGet.Host != "::1") ||
				(h.TCPSocket != nil && h.TCPSocket.Host != "" && h.TCPSocket.Host != "127.0.0.1" && h.TCPSocket.Host != "::1")) {
				bad = true
			}
		}
		if bad {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &violation{"probe or lifecycle host", plural("container", "containers", names) + " uses probe or lifecycle hosts other than localhost"}
}

func probeHandler(p *corev1.Probe) *corev1.ProbeHandler {
	if p == nil {
		return nil
	}
	return &p.ProbeHandler
}

func volumeTypes(spec *corev1.PodSpec) *violation {
	var names []string
	types := map[string]bool{}
	for _, v := range spec.Volumes {
		t := ""
		switch {
		case v.ConfigMap != nil, v.CSI != nil, v.DownwardAPI != nil, v.EmptyDir != nil, v.Ephemeral != nil,
			v.PersistentVolumeClaim != nil, v.Projected != nil, v.Secret != nil, v.Image != nil:
			continue
		case v.HostPath != nil:
			t = "hostPath"
		case v.NFS != nil:
			t = "nfs"
		case v.ISCSI != nil:
			t = "iscsi"
		case v.GitRepo != nil:
			t = "gitRepo"
		default:
			t = "unknown"
		}
		names = append(names, v.Name)
		types[t] = true
	}
	if len(names) == 0 {
		return nil
	}
	word := "type"
	if len(types) > 1 {
		word = "types"
	}
	return &violation{"restricted volume types", plural("volume", "volumes", names) + " use" + map[bool]string{true: "s", false: ""}[len(names) == 1] + " restricted volume " + word + " " + quoted(sortedKeys(types))}
}

func privilegeEscalation(spec *corev1.PodSpec, all []container) *violation {
	var names []string
	for _, c := range all {
		if c.sc == nil || c.sc.AllowPrivilegeEscalation == nil || *c.sc.AllowPrivilegeEscalation {
			names = append(names, c.name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return &violation{"allowPrivilegeEscalation != false", plural("container", "containers", names) + " must set securityContext.allowPrivilegeEscalation=false"}
}

func runAsNonRoot(spec *corev1.PodSpec, all []container) *violation {
	podSet := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil
	podTrue := podSet && *spec.SecurityContext.RunAsNonRoot
	var badFalse, unset []string
	podFalse := podSet && !podTrue
	for _, c := range all {
		switch {
		case c.sc != nil && c.sc.RunAsNonRoot != nil && !*c.sc.RunAsNonRoot:
			badFalse = append(badFalse, c.name)
		case c.sc != nil && c.sc.RunAsNonRoot != nil:
		case !podTrue:
			unset = append(unset, c.name)
		}
	}
	var parts []string
	if podFalse {
		parts = append(parts, "pod must not set securityContext.runAsNonRoot=false")
	}
	if len(badFalse) > 0 {
		parts = append(parts, plural("container", "containers", badFalse)+" must not set securityContext.runAsNonRoot=false")
	}
	if len(unset) > 0 && !podFalse {
		parts = append(parts, "pod or "+plural("container", "containers", unset)+" must set securityContext.runAsNonRoot=true")
	}
	if len(parts) == 0 {
		return nil
	}
	return &violation{"runAsNonRoot != true", strings.Join(parts, "; ")}
}

func runAsUser(spec *corev1.PodSpec, all []container) *violation {
	var parts []string
	if sc := spec.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		parts = append(parts, "pod must not set runAsUser=0")
	}
	var names []string
	for _, c := range all {
		if c.sc != nil && c.sc.RunAsUser != nil && *c.sc.RunAsUser == 0 {
			names = append(names, c.name)
		}
	}
	if len(names) > 0 {
		parts = append(parts, plural("container", "containers", names)+" must not set runAsUser=0")
	}
	if len(parts) == 0 {
		return nil
	}
	return &violation{"runAsUser=0", strings.Join(parts, "; ")}
}

func seccompRestricted(spec *corev1.PodSpec, all []container) *violation {
	ok := func(p *corev1.SeccompProfile) bool {
		return p != nil && (p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost)
	}
	var podProfile *corev1.SeccompProfile
	if spec.SecurityContext != nil {
		podProfile = spec.SecurityContext.SeccompProfile
	}
	var parts, bad, unset []string
	if podProfile != nil && !ok(podProfile) {
		parts = append(parts, fmt.Sprintf("pod must not set securityContext.seccompProfile.type to %q", podProfile.Type))
	}
	for _, c := range all {
		switch {
		case c.sc != nil && c.sc.SeccompProfile != nil && !ok(c.sc.SeccompProfile):
			bad = append(bad, c.name)
		case c.sc != nil && c.sc.SeccompProfile != nil:
		case !ok(podProfile):
			unset = append(unset, c.name)
		}
	}
	if len(bad) > 0 {
		parts = append(parts, plural("container", "containers", bad)+` must not set securityContext.seccompProfile.type to "Unconfined"`)
	}
	if len(unset) > 0 && podProfile == nil {
		parts = append(parts, "pod or "+plural("container", "containers", unset)+` must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`)
	}
	if len(parts) == 0 {
		return nil
	}
	return &violation{"seccompProfile", strings.Join(parts, "; ")}
}

func restrictedCapabilities(all []container) *violation {
	var noDrop, badAdd []string
	caps := map[string]bool{}
	for _, c := range all {
		dropsAll := false
		if c.sc != nil && c.sc.Capabilities != nil {
			for _, d := range c.sc.Capabilities.Drop {
				if d == "ALL" {
					dropsAll = true
				}
			}
			found := false
			for _, a := range c.sc.Capabilities.Add {
				if a != "NET_BIND_SERVICE" {
					found = true
					caps[string(a)] = true
				}
			}
			if found {
				badAdd = append(badAdd, c.name)
			}
		}
		if !dropsAll {
			noDrop = append(noDrop, c.name)
		}
	}
	var parts []string
	if len(noDrop) > 0 {
		parts = append(parts, plural("container", "containers", noDrop)+` must set securityContext.capabilities.drop=["ALL"]`)
	}
	if len(badAdd) > 0 {
		parts = append(parts, plural("container", "containers", badAdd)+" must not include "+quoted(sortedKeys(caps))+" in securityContext.capabilities.add")
	}
	if len(parts) == 0 {
		return nil
	}
	return &violation{"unrestricted capabilities", strings.Join(parts, "; ")}
}
