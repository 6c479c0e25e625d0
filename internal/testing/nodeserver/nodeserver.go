// Package nodeserver runs a kubelet's node server for tests against a test control
// plane: serving with a certificate of the cluster's CA, trusting client certificates
// of it, and reviewing its callers with the node's own identity, as a joined kubelet.
package nodeserver

import (
	"context"
	"net"
	"testing"

	"k8s.io/client-go/kubernetes"

	nodeserver "mizzen/internal/kubelet/server"
	testapiserver "mizzen/internal/testing/apiserver"
)

// Start serves opts (Runtime and Pods set by the caller) as the node server of
// opts.NodeName on ip, any free port, until ctx ends, and returns the port.
func Start(t *testing.T, ctx context.Context, cp *testapiserver.Server, ip net.IP, opts nodeserver.Options) int {
	t.Helper()
	certFile, keyFile, err := cp.KubeletServing(opts.NodeName+"-serving", opts.NodeName)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Certificate, err = nodeserver.LoadCertificate(certFile, keyFile, "", opts.NodeName); err != nil {
		t.Fatal(err)
	}
	if opts.ClientCAs, err = nodeserver.LoadClientCAs(cp.CAFile()); err != nil {
		t.Fatal(err)
	}
	kubeletCfg, err := cp.ComponentConfig("kubelet-"+opts.NodeName, "system:node:"+opts.NodeName, []string{"system:nodes"})
	if err != nil {
		t.Fatal(err)
	}
	opts.Client = kubernetes.NewForConfigOrDie(kubeletCfg)
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	srv, err := nodeserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ctx, l) }()
	return l.Addr().(*net.TCPAddr).Port
}
