package kubelet

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"mizzen/internal/kubelet/volume"
)

// sandboxHostname is the hostname the runtime sets: none for a host-network pod, which
// shares the node's UTS namespace (runc refuses a hostname without a private one), as
// upstream's kubelet leaves it.
func sandboxHostname(pod *v1.Pod, hostname string) string {
	if pod.Spec.HostNetwork {
		return ""
	}
	return hostname
}

// podHostname is the pod's hostname and its domain ("" for none), as upstream's kubelet
// makes them: spec.hostnameOverride as given, with no domain; else spec.hostname or
// the pod's name, cut to 63 characters without a trailing '-' or '.', in
// <subdomain>.<namespace>.svc.<cluster domain> when the pod names a subdomain. A
// host-network pod has the node's.
func (kl *Kubelet) podHostname(pod *v1.Pod) (hostname, domain string) {
	if pod.Spec.HostNetwork {
		return kl.opts.Hostname, ""
	}
	if o := pod.Spec.HostnameOverride; o != nil {
		return truncateHostname(*o), ""
	}
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.Subdomain != "" {
		domain = pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + kl.opts.ClusterDomain
	}
	return truncateHostname(hostname), domain
}

// truncateHostname cuts a hostname to the 63 characters a kernel hostname may have,
// without a trailing '-' or '.'.
func truncateHostname(h string) string {
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// kernelHostname is the hostname the sandbox's UTS namespace gets: the pod's hostname,
// or its fully qualified name when it asks for that (setHostnameAsFQDN) and has a
// domain, which must then fit the kernel's 64 characters.
func (kl *Kubelet) kernelHostname(pod *v1.Pod) (string, error) {
	hostname, domain := kl.podHostname(pod)
	if pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN || domain == "" {
		return hostname, nil
	}
	fqdn := hostname + "." + domain
	if len(fqdn) > 64 {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (64 characters is the max, %d characters requested)", fqdn, len(fqdn))
	}
	return fqdn, nil
}

// podLogDir is where the runtime writes the pod's container logs, named as upstream.
func (kl *Kubelet) podLogDir(pod *v1.Pod) string {
	return kl.podLogDirOf(pod.Namespace, pod.Name, pod.UID)
}

// podLogDirOf is podLogDir for a pod known only by its key and UID (one gone from the API).
func (kl *Kubelet) podLogDirOf(namespace, name string, uid types.UID) string {
	return filepath.Join(kl.opts.PodLogsDir, namespace+"_"+name+"_"+string(uid))
}

func podLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[labelPodName] = pod.Name
	l[labelPodNamespace] = pod.Namespace
	l[labelPodUID] = string(pod.UID)
	return l
}

// sandboxConfig is the CRI description of the pod's sandbox.
func (kl *Kubelet) sandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dns, err := kl.dnsConfig(pod)
	if err != nil {
		return nil, err
	}
	annotations := make(map[string]string, len(pod.Annotations))
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	hostname, err := kl.kernelHostname(pod)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Hostname:     sandboxHostname(pod, hostname),
		LogDirectory: kl.podLogDir(pod),
		DnsConfig:    dns,
		PortMappings: portMappings(pod),
		Labels:       podLabels(pod),
		Annotations:  annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    cgroupParent(pod),
			SecurityContext: sandboxSecurityContext(pod),
		},
	}
	if cfg.Linux.SecurityContext.Seccomp, err = seccompProfile(kl.seccompDir(), pod.Spec.SecurityContext, nil); err != nil {
		return nil, err
	}
	if sc := pod.Spec.SecurityContext; sc != nil && len(sc.Sysctls) > 0 {
		cfg.Linux.Sysctls = map[string]string{}
		for _, s := range sc.Sysctls {
			cfg.Linux.Sysctls[utilsysctl.NormalizeName(s.Name)] = s.Value
		}
	}
	return cfg, nil
}

// portMappings lists every container port, as upstream passes them to the runtime (the
// CNI portmap plugin acts on those with a hostPort).
func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			out = append(out, &runtimeapi.PortMapping{
				Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	return out
}

// cgroupParent is the pod's cgroup under the QoS hierarchy (cgroupfs driver layout).
func cgroupParent(pod *v1.Pod) string {
	pod1 := "pod" + string(pod.UID)
	switch qosClass(pod) {
	case v1.PodQOSGuaranteed:
		return "/kubepods/" + pod1
	case v1.PodQOSBestEffort:
		return "/kubepods/besteffort/" + pod1
	default:
		return "/kubepods/burstable/" + pod1
	}
}

func sandboxSecurityContext(pod *v1.Pod) *runtimeapi.LinuxSandboxSecurityContext {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}
	for _, c := range pod.Spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			sc.Privileged = true
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
	}
	return sc
}

// supplementalGroupsPolicy is the pod's policy as the CRI names it: Merge (the image's
// groups of the user too) unless the pod asks for Strict.
func supplementalGroupsPolicy(psc *v1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

// dnsConfig builds the pod's resolv.conf per its dnsPolicy and dnsConfig.
func (kl *Kubelet) dnsConfig(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	if (policy == v1.DNSClusterFirst || policy == v1.DNSClusterFirstWithHostNet) && len(kl.opts.ClusterDNS) == 0 {
		policy = v1.DNSDefault // no cluster DNS configured: fall back as upstream does
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		d := kl.opts.ClusterDomain
		cfg.Servers = slices.Clone(kl.opts.ClusterDNS)
		cfg.Searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		host := hostResolvConf()
		cfg.Searches = appendUnique(cfg.Searches, host.Searches...)
		cfg.Options = []string{"ndots:5"}
	case v1.DNSDefault:
		cfg = hostResolvConf()
	case v1.DNSNone:
	}
	if pc := pod.Spec.DNSConfig; pc != nil {
		cfg.Servers = appendUnique(cfg.Servers, pc.Nameservers...)
		cfg.Searches = appendUnique(cfg.Searches, pc.Searches...)
		for _, o := range pc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			cfg.Options = slices.DeleteFunc(cfg.Options, func(s string) bool {
				name, _, _ := strings.Cut(s, ":")
				return name == o.Name
			})
			cfg.Options = append(cfg.Options, opt)
		}
	}
	return cfg, nil
}

func appendUnique(list []string, more ...string) []string {
	for _, m := range more {
		if !slices.Contains(list, m) {
			list = append(list, m)
		}
	}
	return list
}

// hostResolvConf reads the host's /etc/resolv.conf; an unreadable one yields no servers.
func hostResolvConf() *runtimeapi.DNSConfig {
	cfg := &runtimeapi.DNSConfig{}
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return cfg
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			cfg.Servers = append(cfg.Servers, f[1])
		case "search":
			cfg.Searches = f[1:]
		case "options":
			cfg.Options = f[1:]
		}
	}
	return cfg
}

// containerHash identifies a container's spec, recorded as upstream does; a change of
// image shows in it.
func containerHash(c *v1.Container) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%s|%q|%q", c.Name, c.Image, c.Command, c.Args)
	return strconv.FormatUint(uint64(h.Sum32()), 16)
}

// containerConfig is the CRI description of one container instance.
func (kl *Kubelet) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, attempt uint32, restarts int32, imageRef string, sb *runtimeapi.PodSandboxStatus, vols map[string]volume.Mounted) (*runtimeapi.ContainerConfig, error) {
	if err := kl.checkRunAsNonRoot(ctx, pod, c, imageRef); err != nil {
		return nil, err
	}
	env, err := kl.makeEnv(ctx, pod, c, kl.podIPs(pod, sb))
	if err != nil {
		return nil, err
	}
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		vars[kv.Key] = string(kv.Value)
	}
	expandAll := func(in []string) []string {
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = expandVars(s, vars)
		}
		return out
	}
	termPath := c.TerminationMessagePath
	if termPath == "" {
		termPath = v1.TerminationMessagePathDefault
	}
	termPolicy := c.TerminationMessagePolicy
	if termPolicy == "" {
		termPolicy = v1.TerminationMessageReadFile
	}
	mounts, err := kl.containerMounts(pod, c, vols, vars, kl.podIPs(pod, sb), termPath)
	if err != nil {
		return nil, err
	}
	devices, err := volume.ContainerDevices(c, vols)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: attempt},
		Image:      &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:    expandAll(c.Command),
		Args:       expandAll(c.Args),
		WorkingDir: c.WorkingDir,
		Envs:       env,
		Mounts:     mounts,
		Devices:    devices,
		Labels: map[string]string{
			labelContainerName: c.Name,
			labelPodName:       pod.Name,
			labelPodNamespace:  pod.Namespace,
			labelPodUID:        string(pod.UID),
		},
		Annotations: map[string]string{
			annoRestartCount:  strconv.Itoa(int(restarts)),
			annoTermMsgPath:   termPath,
			annoTermMsgPolicy: string(termPolicy),
			annoGracePeriod:   strconv.FormatInt(gracePeriod(pod), 10),
			annoContainerHash: containerHash(c),
			annoResources:     encodeResources(c.Resources),
		},
		LogPath:   filepath.Join(c.Name, strconv.Itoa(int(attempt))+".log"),
		Stdin:     c.Stdin,
		StdinOnce: c.StdinOnce,
		Tty:       c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       kl.linuxResources(pod, c),
			SecurityContext: containerSecurityContext(pod, c),
		},
	}
	if cfg.Linux.SecurityContext.Seccomp, err = seccompProfile(kl.seccompDir(), pod.Spec.SecurityContext, c.SecurityContext); err != nil {
		return nil, err
	}
	cfg.Linux.SecurityContext.Apparmor, cfg.Linux.SecurityContext.ApparmorProfile = appArmorForRuntime(appArmorProfile(pod, c))
	return cfg, nil
}

// podIPs are the pod's IPs, primary first: its sandbox's; a host-network pod's sandbox
// has none of its own, and the pod has the node's, as its status reports them (for its
// environment, probes and hooks too).
func (kl *Kubelet) podIPs(pod *v1.Pod, sb *runtimeapi.PodSandboxStatus) []string {
	if ips := sandboxIPs(sb); len(ips) > 0 || !pod.Spec.HostNetwork || sb == nil {
		return ips
	}
	return []string{kl.opts.NodeIP}
}

// firstPodIP is the pod's primary IP (podIPs), or "".
func (kl *Kubelet) firstPodIP(pod *v1.Pod, sb *runtimeapi.PodSandboxStatus) string {
	if ips := kl.podIPs(pod, sb); len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// sandboxIPs are the pod IPs the sandbox reports, primary first.
func sandboxIPs(sb *runtimeapi.PodSandboxStatus) []string {
	n := sb.GetNetwork()
	if n.GetIp() == "" {
		return nil
	}
	ips := []string{n.Ip}
	for _, a := range n.AdditionalIps {
		ips = append(ips, a.Ip)
	}
	return ips
}

func containerSecurityContext(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: sandboxSecurityContext(pod).NamespaceOptions,
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		// The fsGroup owns the pod's volumes, so every container's processes carry it
		// as a supplemental group (first, as upstream's kubelet lists it): a container
		// running as another user reaches its volumes through that group.
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
	}
	csc := c.SecurityContext
	if csc == nil {
		return sc
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	return sc
}
