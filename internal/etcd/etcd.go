// Package etcd runs an etcd member inside the mizzen process (the embedded default of
// `mizzen server`, and the `mizzen etcd` command for external clusters) and dials
// external clusters.
package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// MemberConfig describes one etcd member.
type MemberConfig struct {
	Name    string
	DataDir string
	// ClientURLs to listen on for clients; empty means none (in-process client only).
	ClientURLs []string
	// PeerURLs to listen on for other members; empty means a loopback-only single member.
	PeerURLs []string
	// InitialCluster is "name=peerURL,..."; empty means a single-member cluster.
	InitialCluster string
	// ClusterState is "new" or "existing".
	ClusterState string
	// ClientTLS, when set, serves ClientURLs over TLS and requires client certificates
	// of its CA.
	ClientTLS *TLSFiles
	// PeerTLS, when set, serves PeerURLs over TLS and requires peers to present a
	// certificate of its CA (the cluster's etcd CA): mutual TLS between members. Its
	// certificate must be valid both for serving and as a client.
	PeerTLS *TLSFiles
	// AdvertiseClientURLs are the client URLs other members and clients are told;
	// empty means ClientURLs.
	AdvertiseClientURLs []string
	// ForceNewCluster makes the member forget every other member (a cluster reset).
	ForceNewCluster bool
	// Alone is a member no other member can join while it runs (a single server's
	// embedded member, whose peer URL is a loopback port nobody dials). See
	// aloneCatchUpEntries.
	Alone bool
}

// aloneCatchUpEntries is how much of the raft log a member that is Alone keeps in
// memory after each compaction. etcd snapshots its raft log in memory every 100
// applied entries and then drops all but SnapshotCatchUpEntries of it (5,000 by
// default), kept for a slow follower to catch up from without a whole snapshot. A
// member alone has no follower: those entries, the last 5,000 writes (~7 MB when they
// are pods), are never read. The WAL on disk and the snapshots a restart replays are
// not affected; a server that later becomes the first of a cluster of servers
// restarts its member without Alone, with etcd's defaults.
const aloneCatchUpEntries = 500

// TLSFiles are the PEM files of a TLS endpoint: its certificate and key, and the CA
// the other side's certificate must come from.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
}

// Member is a running etcd member.
type Member struct {
	etcd *embed.Etcd
}

func parseURLs(list []string) ([]url.URL, error) {
	var out []url.URL
	for _, s := range list {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("bad URL %q: %w", s, err)
		}
		out = append(out, *u)
	}
	return out, nil
}

// Start runs a member and waits until it is ready to serve.
func Start(ctx context.Context, mc MemberConfig, log *slog.Logger) (*Member, error) {
	cfg := embed.NewConfig()
	cfg.Name = mc.Name
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	cfg.Dir = mc.DataDir
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// The apiserver keeps its own history in the watch cache; etcd keeps five minutes.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "5m"
	cfg.SnapshotCount = 10000
	if mc.Alone {
		cfg.SnapshotCatchUpEntries = aloneCatchUpEntries
	}
	cfg.Metrics = "basic"
	var err error
	if cfg.ListenClientUrls, err = parseURLs(mc.ClientURLs); err != nil {
		return nil, err
	}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	if len(mc.AdvertiseClientURLs) > 0 {
		if cfg.AdvertiseClientUrls, err = parseURLs(mc.AdvertiseClientURLs); err != nil {
			return nil, err
		}
	}
	if t := mc.ClientTLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
	}
	if len(mc.PeerURLs) > 0 {
		if cfg.ListenPeerUrls, err = parseURLs(mc.PeerURLs); err != nil {
			return nil, err
		}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		if t := mc.PeerTLS; t != nil {
			cfg.PeerTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
		}
	} else {
		// A single member still needs a peer URL; keep it on a loopback port nobody uses.
		u, _ := url.Parse("http://127.0.0.1:0")
		cfg.ListenPeerUrls = []url.URL{*u}
		cfg.AdvertisePeerUrls = []url.URL{*u}
	}
	if mc.InitialCluster != "" {
		cfg.InitialCluster = mc.InitialCluster
	} else {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	cfg.ForceNewCluster = mc.ForceNewCluster
	if mc.ClusterState != "" {
		cfg.ClusterState = mc.ClusterState
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd failed: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready within 60s")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	log.Info("etcd ready", "name", cfg.Name, "dir", cfg.Dir)
	return &Member{etcd: e}, nil
}

// Client returns an in-process client: no network hop between apiserver and etcd.
func (m *Member) Client() *clientv3.Client { return v3client.New(m.etcd.Server) }

// ClientURLs are where the member serves clients, with the ports it was given (a
// listen URL of port 0 gets a free one).
func (m *Member) ClientURLs() []string {
	var out []string
	for i, l := range m.etcd.Clients {
		scheme := "http"
		if i < len(m.etcd.Config().ListenClientUrls) {
			scheme = m.etcd.Config().ListenClientUrls[i].Scheme
		}
		out = append(out, scheme+"://"+l.Addr().String())
	}
	return out
}

// Done is closed when the member stops.
func (m *Member) Done() <-chan struct{} { return m.etcd.Server.StopNotify() }

// Close stops the member.
func (m *Member) Close() { m.etcd.Close() }

// Dial connects to an external cluster given as comma-separated client URLs, with
// mutual TLS when t is set (the CA the members' certificates come from, and this
// client's certificate).
func Dial(ctx context.Context, servers string, t *TLSFiles) (*clientv3.Client, error) {
	endpoints := strings.Split(servers, ",")
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		Context:     ctx,
	}
	if t != nil {
		tc, err := t.ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	for _, e := range endpoints {
		if u, err := url.Parse(e); err == nil && u.Scheme == "https" && cfg.TLS == nil {
			return nil, fmt.Errorf("etcd %s is served over TLS: give --etcd-cafile, --etcd-certfile and --etcd-keyfile", e)
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %s: %w", servers, err)
	}
	return cli, nil
}

// ClientConfig is the TLS configuration of a client of these files: it trusts CAFile
// and presents CertFile/KeyFile when given.
func (t *TLSFiles) ClientConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA %s: no certificates", t.CAFile)
		}
	}
	if t.CertFile != "" || t.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// ID is the member's id in its cluster.
func (m *Member) ID() uint64 { return uint64(m.etcd.Server.MemberID()) }
