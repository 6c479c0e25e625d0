package volume

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// HostsFile writes the pod's managed /etc/hosts (RootDir/pods/<uid>/etc-hosts) and
// returns its path: localhost entries, the pod's own names on its IPs, then the
// spec's hostAliases, as upstream's kubelet writes it: hostname in domain, if any
// (see the kubelet's podHostname). Host-network pods get a copy of the node's
// /etc/hosts plus their aliases.
func (m *Manager) HostsFile(pod *v1.Pod, hostname, domain string, podIPs []string) (string, error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		host, err := os.ReadFile("/etc/hosts")
		if err != nil && !os.IsNotExist(err) {
			return "", err
		}
		b.Write(host)
		if len(host) > 0 && host[len(host)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			b.WriteString(a.IP)
			for _, h := range a.Hostnames {
				b.WriteString("\t" + h)
			}
			b.WriteByte('\n')
		}
	}
	path := filepath.Join(m.PodDir(pod.UID), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", err
	}
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, b.Bytes()) {
		return path, nil
	}
	return path, os.WriteFile(path, b.Bytes(), 0o644)
}

// ManagesHosts reports whether the kubelet mounts its hosts file into the container:
// not when the container mounts something at /etc/hosts itself.
func ManagesHosts(c *v1.Container) bool {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == "/etc/hosts" {
			return false
		}
	}
	return true
}

// TerminationLogFile creates an empty file for one container instance's termination
// message (RootDir/pods/<uid>/containers/<name>/<random>) and returns its path.
func (m *Manager) TerminationLogFile(uid types.UID, container string) (string, error) {
	dir := filepath.Join(m.PodDir(uid), "containers", container)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	path := filepath.Join(dir, hex.EncodeToString(id[:]))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return "", err
	}
	if err := f.Chmod(0o666); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
