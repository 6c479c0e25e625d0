// Package containerd runs the real container runtime for a kubelet: it generates a
// containerd 1.6 configuration (CRI plugin with its own root and state under a data
// directory, CNI binaries and configuration, the sandbox image), supervises the
// containerd process, writes the pod network's CNI configuration, and packages and
// imports the sandbox (pause) image as an OCI archive, since no registry is reachable.
package containerd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultSandboxImage is the name the locally built pause image is imported under.
const DefaultSandboxImage = "registry.k8s.io/pause:3.10"

// Options locate everything the runtime needs. DataDir is required.
type Options struct {
	DataDir      string
	SandboxImage string // DefaultSandboxImage when empty
	CNIBinDir    string // /usr/lib/cni (Debian's containernetworking-plugins) when empty
	Snapshotter  string // overlayfs when empty
	Bridge       string // the pod network's bridge; mizzen0 when empty
	// ClusterCIDR is every node's pods: traffic from this node's pods to it is not
	// masqueraded (pod to pod across nodes keeps its source). Only the node's own pod
	// CIDR is exempt when empty.
	ClusterCIDR string
	// MTU is the pods' interface MTU (an overlay's is smaller than the link's); the
	// bridge plugin's default when zero.
	MTU int
	// Address is the socket of a containerd not supervised here, for image imports;
	// the socket under DataDir when empty.
	Address string
	// ContainerdPath and CtrPath are the binaries; found in PATH when empty.
	ContainerdPath string
	CtrPath        string
	// ConfigVersion is the configuration format: 2 for containerd 1.x, 3 for containerd
	// 2.x. Run asks the binary (containerd --version) when zero.
	ConfigVersion int
	// Registries are the mirrors and registry hosts' settings (--private-registry),
	// written as hosts.toml files under HostsDir; none when nil.
	Registries *Registries
	// StreamServerPort is where the CRI streaming server (exec, attach, port-forward)
	// listens on 127.0.0.1; Run picks a free port when zero, so several containerds can
	// share a host.
	StreamServerPort int
}

func (o *Options) setDefaults() {
	if o.SandboxImage == "" {
		o.SandboxImage = DefaultSandboxImage
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = "/usr/lib/cni"
	}
	if o.Snapshotter == "" {
		o.Snapshotter = "overlayfs"
	}
	if o.Bridge == "" {
		o.Bridge = "mizzen0"
	}
	if o.CtrPath == "" {
		o.CtrPath = "ctr"
		// A containerd the user names comes with its own ctr, of the same version.
		if beside := filepath.Join(filepath.Dir(o.ContainerdPath), "ctr"); o.ContainerdPath != "" && fileExists(beside) {
			o.CtrPath = beside
		}
	}
	if o.ContainerdPath == "" {
		o.ContainerdPath = "containerd"
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Socket is the CRI endpoint's socket path.
func (o Options) Socket() string { return filepath.Join(o.DataDir, "containerd.sock") }

// Endpoint is the CRI endpoint for the kubelet.
func (o Options) Endpoint() string { return "unix://" + o.Socket() }

// CNIConfDir is where the pod network configuration lives.
func (o Options) CNIConfDir() string { return filepath.Join(o.DataDir, "cni", "net.d") }

// HostsDir is containerd's registry configuration directory (config_path): one
// HOST/hosts.toml per registry with mirrors or TLS settings.
func (o Options) HostsDir() string { return filepath.Join(o.DataDir, "certs.d") }

func (o Options) configPath() string { return filepath.Join(o.DataDir, "containerd.toml") }

// toml quotes a string for TOML (the JSON escaping rules are a subset TOML accepts).
func toml(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Config renders containerd's configuration, in version 2 of its format (containerd
// 1.x) or, with ConfigVersion 3, containerd 2's, where the CRI plugin is split into its
// images, runtime and server parts. restrict_oom_score_adj keeps runc from lowering a
// container's oom_score_adj below containerd's own, which root without CAP_SYS_RESOURCE
// may not do; without it every sandbox fails to start.
func (o Options) Config() string {
	o.setDefaults()
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	v3 := o.ConfigVersion >= 3
	cri, images, runtime := `plugins."io.containerd.grpc.v1.cri"`, `plugins."io.containerd.grpc.v1.cri"`, `plugins."io.containerd.grpc.v1.cri"`
	if v3 {
		images, runtime = `plugins."io.containerd.cri.v1.images"`, `plugins."io.containerd.cri.v1.runtime"`
		p("version = 3")
	} else {
		p("version = 2")
	}
	p("root = %s", toml(filepath.Join(o.DataDir, "root")))
	p("state = %s", toml(filepath.Join(o.DataDir, "state")))
	p(`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]`)
	p("")
	p("[grpc]")
	p("  address = %s", toml(o.Socket()))
	p("")
	p(`[plugins."io.containerd.internal.v1.opt"]`)
	p("  path = %s", toml(filepath.Join(o.DataDir, "opt")))
	p("")
	p("[%s]", cri)
	if !v3 {
		p("  sandbox_image = %s", toml(o.SandboxImage))
		p("  restrict_oom_score_adj = true")
	}
	// Only the kubelet, on this host, talks to the streaming server: it proxies the
	// apiserver's authenticated exec/attach/port-forward requests to it.
	p(`  stream_server_address = "127.0.0.1"`)
	p("  stream_server_port = %s", toml(strconv.Itoa(o.StreamServerPort)))
	if v3 {
		p("")
		p("[%s]", images)
		p("  snapshotter = %s", toml(o.Snapshotter))
		p("  [%s.pinned_images]", images)
		p("    sandbox = %s", toml(o.SandboxImage))
		p("")
		p("[%s]", runtime)
		p("  restrict_oom_score_adj = true")
	}
	p("  enable_selinux = false")
	// Pod network namespaces live under the state directory, so that everything a node
	// leaves on the host is under its data directory (mizzen killall unmounts them there)
	// and two nodes on one host never share /var/run/netns.
	p("  netns_mounts_under_state_dir = true")
	p(`  [%s.containerd]`, runtime)
	if !v3 {
		p("    snapshotter = %s", toml(o.Snapshotter))
	}
	p(`    default_runtime_name = "runc"`)
	p(`    [%s.containerd.runtimes.runc]`, runtime)
	p(`      runtime_type = "io.containerd.runc.v2"`)
	p(`      [%s.containerd.runtimes.runc.options]`, runtime)
	p("        SystemdCgroup = false")
	p(`  [%s.cni]`, runtime)
	if v3 {
		p("    bin_dirs = [%s]", toml(o.CNIBinDir))
	} else {
		p("    bin_dir = %s", toml(o.CNIBinDir))
	}
	p("    conf_dir = %s", toml(o.CNIConfDir()))
	p("    max_conf_num = 1")
	// Mirrors and TLS settings live in hosts.toml files (WriteHostsDir); credentials,
	// which those cannot hold, in the plugin's per-host auth.
	if !v3 {
		p("")
	}
	p("[%s.registry]", images)
	p("  config_path = %s", toml(o.HostsDir()))
	b.WriteString(o.Registries.authConfig(images + ".registry"))
	return b.String()
}

// CNIConfList is the pod network: a bridge with host-local addresses from the node's pod
// CIDR, and portmap for hostPorts. Traffic leaving the network is masqueraded by one
// nftables rule (EnsureMasquerade), not by the bridge plugin's per-pod chains. containerd's CRI
// plugin adds the loopback interface itself, with the loopback plugin from CNIBinDir.
// ipamDir keeps host-local's address reservations with the node's own state: in the
// shared default (/var/lib/cni/networks) a previous cluster's leftovers would exhaust
// the range.
func CNIConfList(podCIDR, bridge, ipamDir string, mtu int) ([]byte, error) {
	prefix, err := netip.ParsePrefix(podCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	defaultRoute := "0.0.0.0/0"
	if prefix.Addr().Is6() {
		defaultRoute = "::/0"
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "mizzen",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges":  [][]map[string]string{{{"subnet": prefix.Masked().String()}}},
					"routes":  []map[string]string{{"dst": defaultRoute}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	if mtu > 0 {
		conf["plugins"].([]any)[0].(map[string]any)["mtu"] = mtu
	}
	return json.MarshalIndent(conf, "", "  ")
}

// WriteCNIConfig writes the pod network configuration for podCIDR, which containerd
// picks up without a restart, and installs its masquerade rule.
func (o Options) WriteCNIConfig(podCIDR string) error {
	o.setDefaults()
	data, err := CNIConfList(podCIDR, o.Bridge, filepath.Join(o.DataDir, "cni-ipam"), o.MTU)
	if err != nil {
		return err
	}
	if err := EnsureMasquerade(o.Bridge, podCIDR, o.ClusterCIDR); err != nil {
		return err
	}
	if err := os.MkdirAll(o.CNIConfDir(), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(o.CNIConfDir(), ".10-mizzen.conflist.tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(o.CNIConfDir(), "10-mizzen.conflist"))
}
