package jointoken

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The public ConfigMap a joining machine reads the cluster's CA from, as kubeadm's
// discovery does: kube-public/cluster-info, readable by system:anonymous.
const (
	ClusterInfoNamespace = "kube-public"
	ClusterInfoName      = "cluster-info"
	clusterInfoKey       = "kubeconfig"
)

// ClusterInfo is the cluster-info ConfigMap for a cluster served at server with the
// CA certificate caPEM: a kubeconfig with the cluster and no credentials.
func ClusterInfo(server string, caPEM []byte) (*corev1.ConfigMap, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterInfoName, Namespace: ClusterInfoNamespace},
		Data:       map[string]string{clusterInfoKey: string(data)},
	}, nil
}

// FetchCA reads the cluster's CA from server (https://HOST:PORT) without trusting the
// server yet, and returns it only once it matches the token's CA hash. Nothing
// secret is sent: the request carries no credentials.
func (t Token) FetchCA(ctx context.Context, server string) ([]byte, error) {
	server = strings.TrimSuffix(server, "/")
	if !strings.HasPrefix(server, "https://") {
		return nil, fmt.Errorf("--server %q: the server's address must start with https://", server)
	}
	// Unverified on purpose: the hash check below is the verification.
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		server+"/api/v1/namespaces/"+ClusterInfoNamespace+"/configmaps/"+ClusterInfoName, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the server to read its CA: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the server's cluster-info: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the server's cluster-info: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(body, &cm); err != nil {
		return nil, fmt.Errorf("the server's cluster-info is not a ConfigMap: %w", err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data[clusterInfoKey]))
	if err != nil {
		return nil, fmt.Errorf("the server's cluster-info holds no kubeconfig: %w", err)
	}
	for _, c := range cfg.Clusters {
		if len(c.CertificateAuthorityData) == 0 {
			continue
		}
		if err := t.VerifyCA(c.CertificateAuthorityData); err != nil {
			return nil, err
		}
		return c.CertificateAuthorityData, nil
	}
	return nil, errors.New("the server's cluster-info names no CA certificate")
}
