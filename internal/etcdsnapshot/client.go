package etcdsnapshot

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"mizzen/internal/datadir"
	"mizzen/internal/etcd"
	"mizzen/internal/pki"
)

// The embedded etcd's own CA and certificates in DIR/tls/etcd (as k3s's tls/etcd):
// server-ca signs the member's serving certificate and the client certificate that
// snapshots are taken with; no certificate of the cluster CA reaches etcd.
const (
	etcdCAName     = "server-ca"
	etcdServerName = "server"
	etcdClientName = "client"
	etcdPeerName   = "peer"
	// EtcdClientUser is the client certificate's common name.
	EtcdClientUser = "etcd-client"
)

// EmbeddedClientTLS makes (or keeps) the embedded etcd's CA and client certificate and
// issues its serving certificate for loopback and ips (the machine's address, where
// the members of a cluster of servers reach each other's clients), returning the
// member's TLS files.
func EmbeddedClientTLS(d datadir.Dir, ips ...net.IP) (*etcd.TLSFiles, error) {
	dir := d.EtcdTLS()
	ca, err := pki.LoadOrCreateCA(dir, etcdCAName, "etcd-server-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.IssueServing("etcd-server", []string{"localhost"}, append([]net.IP{net.ParseIP("127.0.0.1")}, ips...))
	if err != nil {
		return nil, err
	}
	cert, key := filepath.Join(dir, etcdServerName+".crt"), filepath.Join(dir, etcdServerName+".key")
	if err := serving.Write(cert, key); err != nil {
		return nil, err
	}
	if _, err := ca.LoadOrIssueClient(dir, etcdClientName, EtcdClientUser, nil); err != nil {
		return nil, err
	}
	return &etcd.TLSFiles{CertFile: cert, KeyFile: key, CAFile: filepath.Join(dir, etcdCAName+".crt")}, nil
}

// EmbeddedPeerTLS issues the embedded member's peer certificate of the etcd CA, for
// loopback and ips: the member presents it to the other members and requires theirs
// to come from the same CA.
func EmbeddedPeerTLS(d datadir.Dir, ips ...net.IP) (*etcd.TLSFiles, error) {
	dir := d.EtcdTLS()
	ca, err := pki.LoadOrCreateCA(dir, etcdCAName, "etcd-server-ca")
	if err != nil {
		return nil, err
	}
	peer, err := ca.IssuePeer("etcd-peer", []string{"localhost"}, append([]net.IP{net.ParseIP("127.0.0.1")}, ips...))
	if err != nil {
		return nil, err
	}
	cert, key := filepath.Join(dir, etcdPeerName+".crt"), filepath.Join(dir, etcdPeerName+".key")
	if err := peer.Write(cert, key); err != nil {
		return nil, err
	}
	return &etcd.TLSFiles{CertFile: cert, KeyFile: key, CAFile: filepath.Join(dir, etcdCAName+".crt")}, nil
}

// EmbeddedClientFiles are the etcd CA and the client certificate a server's own tools
// (snapshots, joining and leaving a cluster) reach etcd members with.
func EmbeddedClientFiles(d datadir.Dir) *etcd.TLSFiles {
	dir := d.EtcdTLS()
	return &etcd.TLSFiles{CAFile: filepath.Join(dir, etcdCAName+".crt"),
		CertFile: filepath.Join(dir, etcdClientName+".crt"), KeyFile: filepath.Join(dir, etcdClientName+".key")}
}

// SharedCAFiles are the etcd CA's files, relative to the data directory, which every
// server of a cluster must hold alike.
func SharedCAFiles() []string {
	dir := datadir.Dir("").EtcdTLS() // the data directory's own name for it, relative
	return []string{filepath.Join(dir, etcdCAName+".crt"), filepath.Join(dir, etcdCAName+".key")}
}

// PublishClientURL records where the running server's embedded etcd serves clients.
func PublishClientURL(d datadir.Dir, url string) error {
	if err := os.MkdirAll(d.DB(), 0o700); err != nil {
		return err
	}
	return os.WriteFile(d.EtcdClientURL(), []byte(url+"\n"), 0o600)
}

// External is how to reach an external etcd cluster: comma-separated client URLs and,
// for TLS, the files of --etcd-cafile/--etcd-certfile/--etcd-keyfile.
type External struct {
	Servers                   string
	CAFile, CertFile, KeyFile string
}

// Connect dials the etcd to snapshot: the external cluster when ext.Servers is set,
// else the embedded member of the server running on data directory d.
func Connect(ctx context.Context, d datadir.Dir, ext External) (*clientv3.Client, error) {
	cfg := clientv3.Config{DialTimeout: 10 * time.Second, Logger: zap.NewNop(), Context: ctx}
	if ext.Servers != "" {
		cfg.Endpoints = strings.Split(ext.Servers, ",")
		if ext.CAFile != "" || ext.CertFile != "" {
			t, err := tlsConfig(ext.CAFile, ext.CertFile, ext.KeyFile)
			if err != nil {
				return nil, err
			}
			cfg.TLS = t
		}
	} else {
		url, err := os.ReadFile(d.EtcdClientURL())
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no embedded etcd has run on %s (no %s): start `mizzen server --data-dir %s`, or give --etcd-servers", d.Root(), d.EtcdClientURL(), d.Root())
		} else if err != nil {
			return nil, err
		}
		dir := d.EtcdTLS()
		t, err := tlsConfig(filepath.Join(dir, etcdCAName+".crt"), filepath.Join(dir, etcdClientName+".crt"), filepath.Join(dir, etcdClientName+".key"))
		if err != nil {
			return nil, err
		}
		cfg.Endpoints, cfg.TLS = []string{strings.TrimSpace(string(url))}, t
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %v: %w", cfg.Endpoints, err)
	}
	// The client dials lazily: ask for the member's status so a stopped server is
	// reported here, not as a failed snapshot.
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Status(sctx, cfg.Endpoints[0]); err != nil {
		_ = cli.Close()
		if ext.Servers == "" {
			return nil, fmt.Errorf("etcd of the server on %s does not answer at %s (is `mizzen server --data-dir %s` running?): %w", d.Root(), cfg.Endpoints[0], d.Root(), err)
		}
		return nil, fmt.Errorf("etcd %s does not answer: %w", ext.Servers, err)
	}
	return cli, nil
}

func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificates", caFile)
		}
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
