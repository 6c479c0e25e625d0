package datadir

import "testing"

// The layout is what users, docs and scripts (make run, killall) rely on.
func TestLayout(t *testing.T) {
	d := Dir("/d")
	cert, key := d.Cert("kubelet")
	for got, want := range map[string]string{
		d.CACert():            "/d/tls/ca.crt",
		cert:                  "/d/tls/kubelet.crt",
		key:                   "/d/tls/kubelet.key",
		d.ServiceAccountKey(): "/d/tls/sa.key",
		d.AdminKubeconfig():   "/d/admin.kubeconfig",
		d.Kubeconfig("dns"):   "/d/dns.kubeconfig",
		d.Etcd():              "/d/etcd",
		d.EtcdOld(7):          "/d/etcd-old-7",
		d.EtcdTLS():           "/d/tls/etcd",
		d.Snapshots():         "/d/db/snapshots",
		d.EtcdClientURL():     "/d/db/etcd-client-url",
		d.Kubelet():           "/d/agent/kubelet",
		d.Containerd():        "/d/agent/containerd",
		d.Images():            "/d/agent/images",
		d.PodManifests():      "/d/agent/pod-manifests",
		d.Storage():           "/d/storage",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}
