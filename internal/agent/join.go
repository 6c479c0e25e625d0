package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"mizzen/internal/agent/nodecert"
	"mizzen/internal/datadir"
	"mizzen/internal/jointoken"
)

// JoinOptions are `mizzen agent --server URL --token TOKEN`.
type JoinOptions struct {
	Server, Token string
	Dir           datadir.Dir
	NodeName      string
}

// Joined are a joined node's credentials: the kubelet's and the proxy's rest
// configs, whose client certificates rotate in place, the cluster CA file, and the
// kubelet's serving certificate, issued once the node has registered.
type Joined struct {
	KubeletConfig, ProxyConfig *rest.Config
	CAFile                     string
	Serving                    *nodecert.Manager
	managers                   []*nodecert.Manager
}

// The files of a joined node under DATA_DIR/agent/kubelet/pki, as upstream's kubelet names them.
const (
	caFileName          = "ca.crt"
	kubeletClientFile   = "kubelet-client-current.pem"
	kubeletServingFile  = "kubelet-server-current.pem"
	kubeProxyClientFile = "kube-proxy-client-current.pem"
	// ProxyUser is the identity the proxy of a joined node gets its certificate for,
	// which upstream's system:node-proxier role is bound to.
	ProxyUser = "system:kube-proxy"
)

// Join gets a node's credentials with a join token, as upstream's kubelet TLS
// bootstrap does: it reads the cluster CA without trusting the server and checks it
// against the token before sending anything; with the token it files the node's
// client CSR (CN system:node:NAME, O system:nodes; the key stays here) and waits
// for it; with the node's identity it then gets the proxy's client certificate. On a
// restart the stored certificates are used while valid, and the token only when
// they are not.
func Join(ctx context.Context, o JoinOptions) (*Joined, error) {
	tok, err := jointoken.Parse(o.Token)
	if err != nil {
		return nil, err
	}
	caPEM, err := tok.FetchCA(ctx, o.Server)
	if err != nil {
		return nil, err
	}
	pki := o.Dir.KubeletPKI()
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return nil, err
	}
	caFile := filepath.Join(pki, caFileName)
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	nodeUser := "system:node:" + o.NodeName
	bootstrap := func() (kubernetes.Interface, error) {
		return kubernetes.NewForConfig(&rest.Config{Host: o.Server, BearerToken: tok.Bearer(),
			TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}, UserAgent: "mizzen-agent/bootstrap"})
	}

	client := &nodecert.Manager{
		Path: filepath.Join(pki, kubeletClientFile), Signer: certificatesv1.KubeAPIServerClientKubeletSignerName,
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		Template: func(context.Context) (*x509.CertificateRequest, error) {
			return &x509.CertificateRequest{Subject: pkix.Name{CommonName: nodeUser, Organization: []string{"system:nodes"}}}, nil
		},
	}
	kubeletCfg, kubeletTransport := certConfig(o.Server, pool, client)
	client.OnRotate = kubeletTransport.CloseIdleConnections
	// A node renews its own certificate as itself (selfnodeclient); the token is only
	// for a node without a valid one.
	client.Client = func() (kubernetes.Interface, error) {
		if c := client.Current(); c != nil && time.Now().Before(c.Leaf.NotAfter) {
			return kubernetes.NewForConfig(kubeletCfg)
		}
		return bootstrap()
	}
	if err := client.Ensure(ctx); err != nil {
		if apierrors.IsUnauthorized(errors.Unwrap(err)) || apierrors.IsUnauthorized(err) {
			return nil, fmt.Errorf("the server refused the join token: it is unknown, expired or deleted (mizzen token list on the server shows the valid ones)")
		}
		return nil, fmt.Errorf("getting the node's client certificate: %w", err)
	}
	if err := writeKubeconfig(o.Dir.Kubeconfig("kubelet"), o.Server, caFile, client.Path, nodeUser); err != nil {
		return nil, err
	}
	asNode := func() (kubernetes.Interface, error) { return kubernetes.NewForConfig(kubeletCfg) }

	proxy := &nodecert.Manager{
		Path: filepath.Join(pki, kubeProxyClientFile), Signer: certificatesv1.KubeAPIServerClientSignerName,
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		Template: func(context.Context) (*x509.CertificateRequest, error) {
			return &x509.CertificateRequest{Subject: pkix.Name{CommonName: ProxyUser}}, nil
		},
		Client: asNode,
	}
	proxyCfg, proxyTransport := certConfig(o.Server, pool, proxy)
	proxy.OnRotate = proxyTransport.CloseIdleConnections
	if err := proxy.Ensure(ctx); err != nil {
		return nil, fmt.Errorf("getting the proxy's client certificate: %w", err)
	}

	serving := &nodecert.Manager{
		Path: filepath.Join(pki, kubeletServingFile), Signer: certificatesv1.KubeletServingSignerName,
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
		Template: func(ctx context.Context) (*x509.CertificateRequest, error) {
			return servingRequest(ctx, kubeletCfg, o.NodeName)
		},
		Client: asNode,
	}
	serving.LoadExisting()
	return &Joined{KubeletConfig: kubeletCfg, ProxyConfig: proxyCfg, CAFile: caFile, Serving: serving,
		managers: []*nodecert.Manager{client, proxy, serving}}, nil
}

// Run keeps the certificates current until ctx ends: the serving one is first
// requested once the node has registered with its addresses.
func (j *Joined) Run(ctx context.Context) error {
	for _, m := range j.managers {
		go m.Run(ctx)
	}
	<-ctx.Done()
	return nil
}

// certConfig is a rest config whose client certificate is m's current one, read at
// every handshake.
func certConfig(server string, pool *x509.CertPool, m *nodecert.Manager) (*rest.Config, *http.Transport) {
	t := &http.Transport{
		Proxy:             http.ProxyFromEnvironment,
		ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 25, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     &tls.Config{RootCAs: pool, GetClientCertificate: m.GetClientCertificate, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &rest.Config{Host: server, Transport: t}, t
}

// servingRequest waits until the node reports its addresses, and asks for a serving
// certificate for its names and IPs: the ones the approver checks.
func servingRequest(ctx context.Context, cfg *rest.Config, nodeName string) (*x509.CertificateRequest, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	for {
		node, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err == nil && len(node.Status.Addresses) > 0 {
			req := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}}
			for _, a := range node.Status.Addresses {
				switch a.Type {
				case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
					if !slices.Contains(req.DNSNames, a.Address) {
						req.DNSNames = append(req.DNSNames, a.Address)
					}
				case corev1.NodeInternalIP, corev1.NodeExternalIP:
					if ip := net.ParseIP(a.Address); ip != nil {
						req.IPAddresses = append(req.IPAddresses, ip)
					}
				}
			}
			return req, nil
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("the node never reported its addresses for its serving certificate")
		case <-time.After(time.Second):
		}
	}
}

// writeKubeconfig writes the kubelet's kubeconfig naming the rotating certificate
// file, as upstream's kubelet.conf does, for tools and a restart with --kubeconfig.
func writeKubeconfig(path, server, caFile, certFile, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: certFile}
	cfg.Contexts["default"] = &clientcmdapi.Context{Cluster: "default", AuthInfo: user}
	cfg.CurrentContext = "default"
	return clientcmd.WriteToFile(*cfg, path)
}
