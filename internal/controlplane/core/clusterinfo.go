package core

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/datadir"

	"mizzen/internal/apiserver"
	"mizzen/internal/jointoken"
)

// publishClusterInfo keeps kube-public/cluster-info naming the cluster CA, as
// kubeadm does: a joining machine reads it anonymously and checks the CA against its
// token's hash (jointoken.Token.FetchCA). The server address in it is this server's
// at creation; a restart on another address leaves it (joining machines are told the
// server to use), so a restart writes nothing unless the CA changed.
func publishClusterInfo(ctx context.Context, srv *apiserver.Server, serverURL string, caPEM []byte) error {
	desired, err := jointoken.ClusterInfo(serverURL, caPEM)
	if err != nil {
		return err
	}
	err = srv.Reconcile(ctx, desired, func(current runtime.Object) (runtime.Object, bool) {
		cm, ok := current.(*corev1.ConfigMap)
		if !ok || maps.Equal(cm.Data, desired.Data) || sameCA(cm, caPEM) {
			return current, false
		}
		cm.Data = desired.Data
		return cm, true
	})
	if err != nil {
		return fmt.Errorf("publishing %s/%s: %w", jointoken.ClusterInfoNamespace, jointoken.ClusterInfoName, err)
	}
	return nil
}

// sameCA tells whether a cluster-info ConfigMap already names caPEM.
func sameCA(cm *corev1.ConfigMap, caPEM []byte) bool {
	cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil {
		return false
	}
	for _, c := range cfg.Clusters {
		if bytes.Equal(c.CertificateAuthorityData, caPEM) {
			return true
		}
	}
	return false
}

// CAKeyFile is the cluster CA's private key, which the controller-manager's CSR
// signer issues certificates with (--cluster-signing-key-file).
func (cp *ControlPlane) CAKeyFile() string {
	_, key := datadir.Dir(cp.DataDir).Cert(datadir.CAName)
	return key
}
