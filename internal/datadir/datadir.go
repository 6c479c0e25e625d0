// Package datadir names every path under a mizzen data directory, once: the server's
// certificates, kubeconfigs and embedded etcd, and the agent's kubelet, containerd,
// images and static pods. Every command and bundle asks it for a path instead of
// spelling one, so the layout is read in one place (as k3s names its paths).
//
//	DIR/
//	  admin.kubeconfig, <component>.kubeconfig
//	  tls/            ca.{crt,key}, sa.key, <name>.{crt,key}
//	  etcd/           the embedded etcd member (etcd-old-<unix>/ after a --cluster-reset)
//	  db/
//	    snapshots/    etcd snapshots (k3s: server/db/snapshots)
//	    etcd-client-url  where the running server's embedded etcd serves clients
//	    etcd-member.json this server's member of a cluster of servers (--cluster-init, --server)
//	  agent/
//	    kubelet/      the kubelet's root (pods, pki)
//	    containerd/   the agent's own containerd (state, sockets, CNI)
//	    images/       image archives imported at start
//	    pod-manifests/ static pods
//	  storage/        the local-path StorageClass's volumes on this node
package datadir

import (
	"path/filepath"
	"strconv"
)

// Default is where `mizzen server` and `mizzen agent` keep their state unless told.
const Default = "/var/lib/mizzen"

// Dir is a data directory.
type Dir string

// Root is the directory itself.
func (d Dir) Root() string { return string(d) }

// TLS holds the cluster's certificates and keys.
func (d Dir) TLS() string { return filepath.Join(string(d), "tls") }

// CACert is the cluster CA's certificate.
func (d Dir) CACert() string { return filepath.Join(d.TLS(), CAName+".crt") }

// CAName is the base name of the cluster CA's files in TLS().
const CAName = "ca"

// Cert is the certificate and key of the given name in TLS().
func (d Dir) Cert(name string) (certFile, keyFile string) {
	return filepath.Join(d.TLS(), name+".crt"), filepath.Join(d.TLS(), name+".key")
}

// APIServerServing is the name, in TLS(), of the apiserver's serving certificate and
// key (k3s's serving-kube-apiserver): issued again at every start, kept there so that
// `mizzen certificate check` shows it.
const APIServerServing = "serving-kube-apiserver"

// ServiceAccountKey signs and verifies service account tokens.
func (d Dir) ServiceAccountKey() string { return filepath.Join(d.TLS(), "sa.key") }

// AdminKubeconfig is the cluster-admin's kubeconfig.
func (d Dir) AdminKubeconfig() string { return d.Kubeconfig("admin") }

// Kubeconfig is the kubeconfig of a bundled component (or "admin").
func (d Dir) Kubeconfig(name string) string { return filepath.Join(string(d), name+".kubeconfig") }

// Etcd is the embedded etcd member's data.
func (d Dir) Etcd() string { return filepath.Join(string(d), "etcd") }

// EtcdOld is where a --cluster-reset moves the etcd member's data aside (k3s keeps it
// as etcd-old-<unix time> too).
func (d Dir) EtcdOld(unix int64) string {
	return filepath.Join(string(d), "etcd-old-"+strconv.FormatInt(unix, 10))
}

// EtcdTLS holds the embedded etcd's own CA, its serving certificate and the client
// certificate that snapshots are taken with (as k3s's tls/etcd/).
func (d Dir) EtcdTLS() string { return filepath.Join(d.TLS(), "etcd") }

// DB holds what belongs to the cluster's database besides its member data.
func (d Dir) DB() string { return filepath.Join(string(d), "db") }

// Snapshots is the default directory of etcd snapshots.
func (d Dir) Snapshots() string { return filepath.Join(d.DB(), "snapshots") }

// EtcdClientURL is a file holding the URL the running server's embedded etcd serves
// clients on (a free loopback port, chosen at each start).
func (d Dir) EtcdClientURL() string { return filepath.Join(d.DB(), "etcd-client-url") }

// EtcdMember records this server's embedded etcd member when it belongs to a cluster
// of servers: its name and URLs, and where the other members serve clients.
func (d Dir) EtcdMember() string { return filepath.Join(d.DB(), "etcd-member.json") }

// Agent holds everything of the node agent.
func (d Dir) Agent() string { return filepath.Join(string(d), "agent") }

// Kubelet is the kubelet's root directory.
func (d Dir) Kubelet() string { return filepath.Join(d.Agent(), "kubelet") }

// Containerd is the agent's own containerd's state.
func (d Dir) Containerd() string { return filepath.Join(d.Agent(), "containerd") }

// Images holds image archives the agent imports when it starts.
func (d Dir) Images() string { return filepath.Join(d.Agent(), "images") }

// Storage holds the local-path StorageClass's volumes on this node.
func (d Dir) Storage() string { return filepath.Join(string(d), "storage") }

// KubeletPKI holds a joined node's cluster CA and the certificates it got through
// CSRs, each with its key (upstream's /var/lib/kubelet/pki).
func (d Dir) KubeletPKI() string { return filepath.Join(d.Kubelet(), "pki") }

// PodManifests holds the static pods the kubelet runs.
func (d Dir) PodManifests() string { return filepath.Join(d.Agent(), "pod-manifests") }
