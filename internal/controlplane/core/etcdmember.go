package core

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"mizzen/internal/datadir"
	"mizzen/internal/etcd"
	"mizzen/internal/etcdsnapshot"
	"mizzen/internal/jointoken"
	"mizzen/internal/serverjoin"
)

// Default ports of an embedded member that is part of a cluster of servers, on the
// machine's address (etcd's own defaults, as k3s uses them).
const (
	DefaultEtcdClientPort = 2379
	DefaultEtcdPeerPort   = 2380
)

// memberState is DataDir/db/etcd-member.json: this server's member of a cluster of
// servers. Its presence is what makes a restart rejoin that cluster with no flag.
type memberState struct {
	Name      string `json:"name"`
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL"`
	// ClusterClientURLs are where the members serve clients, as last seen: a server
	// leaving the cluster (--remove) asks the others to forget it.
	ClusterClientURLs []string `json:"clusterClientURLs"`
}

func readMemberState(dir datadir.Dir) (*memberState, error) {
	data, err := os.ReadFile(dir.EtcdMember())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var s memberState
	if err := json.Unmarshal(data, &s); err != nil || s.Name == "" || s.PeerURL == "" {
		return nil, fmt.Errorf("%s is damaged: %v", dir.EtcdMember(), err)
	}
	return &s, nil
}

func (s *memberState) write(dir datadir.Dir) error {
	if err := os.MkdirAll(dir.DB(), 0o700); err != nil {
		return err
	}
	data, _ := json.MarshalIndent(s, "", "  ")
	tmp := dir.EtcdMember() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, dir.EtcdMember())
}

func hasEtcdData(dir datadir.Dir) bool {
	_, err := os.Stat(filepath.Join(dir.Etcd(), "member"))
	return err == nil
}

// memberName is unique per server: machines may share a hostname (containers,
// network namespaces), so a random suffix follows it, as k3s names its members.
func memberName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "mizzen"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

func hostURL(scheme string, ip net.IP, port int) string {
	return scheme + "://" + net.JoinHostPort(ip.String(), strconv.Itoa(port))
}

// embeddedEtcd starts this server's etcd member: alone (the default), as the first
// member of a cluster of servers (--cluster-init), joining one (--server), or as the
// member it was before a restart (DataDir/db/etcd-member.json).
func embeddedEtcd(ctx context.Context, opts Options, dir datadir.Dir, advertise net.IP, log *slog.Logger) (*etcd.Member, error) {
	state, err := readMemberState(dir)
	if err != nil {
		return nil, err
	}
	haveData := hasEtcdData(dir)
	switch {
	case state == nil && !opts.ClusterInit && opts.Join == nil:
		return startEmbeddedEtcd(ctx, dir, log)
	case state != nil && haveData:
		return restartMember(ctx, dir, state, log)
	case opts.Join != nil || state != nil:
		if haveData {
			return nil, fmt.Errorf("--server: %s already holds the etcd data of a cluster of its own; a server joins another cluster only with an empty data directory", dir.Etcd())
		}
		if opts.Join == nil {
			return nil, fmt.Errorf("%s names an etcd member but %s holds no data: join again with --server and --token", dir.EtcdMember(), dir.Etcd())
		}
		return joinCluster(ctx, opts, dir, advertise, state, log)
	default: // --cluster-init
		return initCluster(ctx, opts, dir, advertise, haveData, log)
	}
}

// haMemberConfig is the config of a member of a cluster of servers: peers and remote
// clients on the machine's address with mutual TLS of the etcd CA; local tools on a
// free loopback port.
func haMemberConfig(dir datadir.Dir, s *memberState) (etcd.MemberConfig, error) {
	var ips []net.IP
	for _, raw := range []string{s.PeerURL, s.ClientURL} {
		if u, err := url.Parse(raw); err == nil {
			if ip := net.ParseIP(u.Hostname()); ip != nil && !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
		}
	}
	client, err := etcdsnapshot.EmbeddedClientTLS(dir, ips...)
	if err != nil {
		return etcd.MemberConfig{}, fmt.Errorf("etcd certificates: %w", err)
	}
	peer, err := etcdsnapshot.EmbeddedPeerTLS(dir, ips...)
	if err != nil {
		return etcd.MemberConfig{}, fmt.Errorf("etcd certificates: %w", err)
	}
	return etcd.MemberConfig{Name: s.Name, DataDir: dir.Etcd(), PeerURLs: []string{s.PeerURL},
		ClientURLs: []string{"https://127.0.0.1:0", s.ClientURL}, AdvertiseClientURLs: []string{s.ClientURL},
		ClientTLS: client, PeerTLS: peer, InitialCluster: s.Name + "=" + s.PeerURL}, nil
}

func startHAMember(ctx context.Context, dir datadir.Dir, mc etcd.MemberConfig, log *slog.Logger) (*etcd.Member, error) {
	member, err := etcd.Start(ctx, mc, log)
	if err != nil {
		return nil, err
	}
	if urls := member.ClientURLs(); len(urls) > 0 {
		if err := etcdsnapshot.PublishClientURL(dir, urls[0]); err != nil {
			member.Close()
			return nil, err
		}
	}
	return member, nil
}

// initCluster starts the first member of a cluster of servers; a single server's
// existing member becomes it, its peer URL moved to the machine's address.
func initCluster(ctx context.Context, opts Options, dir datadir.Dir, advertise net.IP, haveData bool, log *slog.Logger) (*etcd.Member, error) {
	state := &memberState{Name: memberName(), PeerURL: hostURL("https", advertise, opts.etcdPeerPort()),
		ClientURL: hostURL("https", advertise, opts.etcdClientPort())}
	if haveData {
		state.Name = EmbeddedEtcdMember.Name
	}
	mc, err := haMemberConfig(dir, state)
	if err != nil {
		return nil, err
	}
	member, err := startHAMember(ctx, dir, mc, log)
	if err != nil {
		return nil, err
	}
	if haveData {
		cli := member.Client()
		uctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := cli.MemberUpdate(uctx, member.ID(), []string{state.PeerURL})
		cancel()
		if err != nil {
			member.Close()
			return nil, fmt.Errorf("--cluster-init: moving the member's peer URL to %s: %w", state.PeerURL, err)
		}
	}
	state.ClusterClientURLs = []string{state.ClientURL}
	if err := state.write(dir); err != nil {
		member.Close()
		return nil, err
	}
	log.Info("etcd: first member of a cluster of servers", "name", state.Name, "peer", state.PeerURL)
	return member, nil
}

// restartMember starts the member this server was, and makes sure it votes: a server
// that stopped after joining as a learner and before its promotion is promoted now.
func restartMember(ctx context.Context, dir datadir.Dir, state *memberState, log *slog.Logger) (*etcd.Member, error) {
	mc, err := haMemberConfig(dir, state)
	if err != nil {
		return nil, err
	}
	member, err := startHAMember(ctx, dir, mc, log)
	if err != nil {
		return nil, err
	}
	if others := without(state.ClusterClientURLs, state.ClientURL); len(others) > 0 {
		if err := promote(ctx, dir, state.ClusterClientURLs, member.ID()); err != nil {
			log.Warn("etcd: this member could not be made a voting member yet", "err", err)
		}
	}
	return member, nil
}

// joinCluster fetches the cluster's shared secrets with the token, adds this machine
// to the etcd cluster as a learner, starts the member, and promotes it once it has
// caught up.
func joinCluster(ctx context.Context, opts Options, dir datadir.Dir, advertise net.IP, prior *memberState, log *slog.Logger) (*etcd.Member, error) {
	secrets, caPEM, err := serverjoin.Fetch(ctx, opts.Join.Server, opts.Join.Token)
	if err != nil {
		return nil, err
	}
	if err := writeShared(dir, caPEM, secrets.Files, opts); err != nil {
		return nil, err
	}
	state := &memberState{Name: memberName(), PeerURL: hostURL("https", advertise, opts.etcdPeerPort()),
		ClientURL: hostURL("https", advertise, opts.etcdClientPort())}
	if prior != nil {
		state.Name = prior.Name
	}
	mc, err := haMemberConfig(dir, state)
	if err != nil {
		return nil, err
	}
	cli, err := etcd.Dial(ctx, strings.Join(secrets.EtcdClientURLs, ","), etcdsnapshot.EmbeddedClientFiles(dir))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	actx, cancel := context.WithTimeout(ctx, time.Minute)
	id, initial, err := etcd.AddLearner(actx, cli, state.Name, state.PeerURL)
	cancel()
	if err != nil {
		return nil, err
	}
	mc.InitialCluster, mc.ClusterState = initial, "existing"
	member, err := startHAMember(ctx, dir, mc, log)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = cli.MemberRemove(rctx, id)
		cancel()
		return nil, fmt.Errorf("starting the new etcd member (it was taken out of the cluster again): %w", err)
	}
	state.ClusterClientURLs = append(slices.Clone(secrets.EtcdClientURLs), state.ClientURL)
	if err := state.write(dir); err != nil {
		member.Close()
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = etcd.PromoteWhenReady(pctx, cli, id)
	cancel()
	if err != nil {
		member.Close()
		return nil, err
	}
	log.Info("etcd: joined the cluster of servers", "name", state.Name, "peer", state.PeerURL, "via", opts.Join.Server)
	return member, nil
}

func promote(ctx context.Context, dir datadir.Dir, urls []string, id uint64) error {
	cli, err := etcd.Dial(ctx, strings.Join(urls, ","), etcdsnapshot.EmbeddedClientFiles(dir))
	if err != nil {
		return err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return etcd.PromoteWhenReady(pctx, cli, id)
}

// keepMemberRecord runs recordMembers every 30 s until ctx ends: members joining
// later must be known to this server when it leaves.
func keepMemberRecord(ctx context.Context, dir datadir.Dir, cli *clientv3.Client) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			recordMembers(ctx, dir, cli)
		}
	}
}

// recordMembers keeps where the members serve clients up to date in the member
// state, for a later --remove.
func recordMembers(ctx context.Context, dir datadir.Dir, cli *clientv3.Client) {
	state, err := readMemberState(dir)
	if err != nil || state == nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := cli.MemberList(lctx)
	if err != nil {
		return
	}
	var urls []string
	for _, m := range list.Members {
		urls = append(urls, m.ClientURLs...)
	}
	slices.Sort(urls)
	if len(urls) > 0 && !slices.Equal(urls, state.ClusterClientURLs) {
		state.ClusterClientURLs = urls
		_ = state.write(dir)
	}
}

// writeShared writes the cluster's shared files into the data directory. A file that
// exists already must be the same (a data directory of another cluster is refused
// before anything is written).
func writeShared(dir datadir.Dir, caPEM []byte, files map[string][]byte, opts Options) error {
	if existing, err := os.ReadFile(dir.CACert()); err == nil && !bytes.Equal(existing, caPEM) {
		return fmt.Errorf("%s holds another cluster's CA: this data directory belongs to another cluster (use an empty --data-dir to join)", dir.CACert())
	}
	paths := map[string]string{}
	for rel, data := range files {
		if filepath.IsAbs(rel) || strings.Contains(rel, "..") {
			return fmt.Errorf("the server sent a file outside the data directory: %q", rel)
		}
		path := filepath.Join(dir.Root(), rel)
		if rel == serviceAccountKeyRel && opts.ServiceAccountSigningKeyFile != "" {
			path = opts.ServiceAccountSigningKeyFile
		}
		if existing, err := os.ReadFile(path); err == nil && !bytes.Equal(existing, data) {
			return fmt.Errorf("%s differs from the cluster's: this data directory belongs to another cluster (use an empty --data-dir to join)", path)
		}
		paths[path] = rel
	}
	for path, rel := range paths {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[rel], 0o600); err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountKeyRel is the shared name of the service-account key in the answer:
// its path relative to the data directory, as internal/datadir names it.
var serviceAccountKeyRel = datadir.Dir("").ServiceAccountKey()

// sharedFiles are what a joining server receives: every CA's certificate and key and
// the service-account key, by path relative to the data directory.
func sharedFiles(dir datadir.Dir, saKeyFile string) (map[string][]byte, error) {
	out := map[string][]byte{}
	abs := []string{dir.CACert(), filepath.Join(dir.TLS(), datadir.CAName+".key"),
		filepath.Join(dir.TLS(), frontProxyCAName+".crt"), filepath.Join(dir.TLS(), frontProxyCAName+".key")}
	for _, rel := range etcdsnapshot.SharedCAFiles() {
		abs = append(abs, filepath.Join(dir.Root(), rel))
	}
	for _, path := range abs {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(dir.Root(), path)
		if err != nil {
			return nil, err
		}
		out[rel] = data
	}
	sa, err := os.ReadFile(saKeyFile)
	if err != nil {
		return nil, err
	}
	out[serviceAccountKeyRel] = sa
	return out, nil
}

func without(list []string, s string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return x == s })
}

// JoinOptions are `mizzen server --server URL --token TOKEN`.
type JoinOptions struct {
	Server string
	Token  jointoken.Token
}

func (o Options) etcdPeerPort() int {
	if o.EtcdPeerPort > 0 {
		return o.EtcdPeerPort
	}
	return DefaultEtcdPeerPort
}

func (o Options) etcdClientPort() int {
	if o.EtcdClientPort > 0 {
		return o.EtcdClientPort
	}
	return DefaultEtcdClientPort
}

// EtcdMemberOf is the embedded member of the server on dir, as a snapshot restored
// for it must name it: a single server's, or its member of a cluster of servers.
func EtcdMemberOf(dir datadir.Dir) (etcdsnapshot.Member, error) {
	state, err := readMemberState(dir)
	if err != nil || state == nil {
		return EmbeddedEtcdMember, err
	}
	return etcdsnapshot.Member{Name: state.Name, PeerURL: state.PeerURL}, nil
}

// EmbeddedPeerTLS are the member's peer certificate files for its peer URL.
func EmbeddedPeerTLS(dir datadir.Dir, peerURL string) (*etcd.TLSFiles, error) {
	var ips []net.IP
	if u, err := url.Parse(peerURL); err == nil {
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		}
	}
	return etcdsnapshot.EmbeddedPeerTLS(dir, ips...)
}

// LeaveCluster takes the stopped server on dir out of its cluster of servers: the
// other members remove its member, and its etcd data is moved aside (as
// DIR/etcd-old-UNIXTIME), so that the data directory can start a new single server
// or join a cluster again. It returns what to tell the user.
func LeaveCluster(ctx context.Context, dir datadir.Dir) (string, error) {
	state, err := readMemberState(dir)
	if err != nil {
		return "", err
	}
	if state == nil {
		return "", fmt.Errorf("--remove: the server on %s is not a member of a cluster of servers (no %s)", dir.Root(), dir.EtcdMember())
	}
	others := without(state.ClusterClientURLs, state.ClientURL)
	if len(others) == 0 {
		return "", fmt.Errorf("--remove: %s is the only member of its cluster: nothing to leave", state.Name)
	}
	cli, err := etcd.Dial(ctx, strings.Join(others, ","), etcdsnapshot.EmbeddedClientFiles(dir))
	if err != nil {
		return "", err
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := etcd.Remove(rctx, cli, state.Name); err != nil {
		return "", fmt.Errorf("--remove: %w (the other members at %v must be up)", err, others)
	}
	old := dir.EtcdOld(time.Now().Unix())
	if hasEtcdData(dir) {
		if err := os.Rename(dir.Etcd(), old); err != nil {
			return "", err
		}
	}
	if err := os.Remove(dir.EtcdMember()); err != nil {
		return "", err
	}
	return fmt.Sprintf("etcd member %s removed from the cluster; its data is in %s", state.Name, old), nil
}

// RemoveMember has the cluster of the server on dir forget the member named name: a
// server whose machine is gone for good ("marked dead"). The server on dir may be
// running; its own member is refused (it leaves with LeaveCluster, stopped).
func RemoveMember(ctx context.Context, dir datadir.Dir, name string) (string, error) {
	state, err := readMemberState(dir)
	if err != nil {
		return "", err
	}
	if state == nil {
		return "", fmt.Errorf("--remove-member: the server on %s is not a member of a cluster of servers (no %s)", dir.Root(), dir.EtcdMember())
	}
	if name == state.Name {
		return "", fmt.Errorf("--remove-member: %s is this server's own member: stop the server and use --remove", name)
	}
	cli, err := etcd.Dial(ctx, strings.Join(state.ClusterClientURLs, ","), etcdsnapshot.EmbeddedClientFiles(dir))
	if err != nil {
		return "", err
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := etcd.MemberID(rctx, cli, name); errors.Is(err, etcd.ErrNotMember) {
		return "", fmt.Errorf("--remove-member: no etcd member is named %q", name)
	} else if err != nil {
		return "", err
	}
	if err := etcd.Remove(rctx, cli, name); err != nil {
		return "", fmt.Errorf("--remove-member: %w", err)
	}
	return fmt.Sprintf("etcd member %s removed from the cluster", name), nil
}

// ClusterMembers is the membership of the cluster of servers the server on dir is a
// member of, reached through the members' client URLs with the etcd CA's client
// certificate; own is the server's member. ok is false for a single server.
func ClusterMembers(dir datadir.Dir) (members *EtcdMembers, own string, ok bool, err error) {
	state, err := readMemberState(dir)
	if err != nil || state == nil {
		return nil, "", false, err
	}
	return &EtcdMembers{dir: dir, endpoints: state.ClusterClientURLs}, state.Name, true, nil
}

// EtcdMembers lists and removes the members of a cluster of servers.
type EtcdMembers struct {
	dir       datadir.Dir
	endpoints []string
}

func (m *EtcdMembers) dial(ctx context.Context) (*clientv3.Client, error) {
	return etcd.Dial(ctx, strings.Join(m.endpoints, ","), etcdsnapshot.EmbeddedClientFiles(m.dir))
}

// Names are the members' names.
func (m *EtcdMembers) Names(ctx context.Context) ([]string, error) {
	cli, err := m.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, member := range list.Members {
		names = append(names, member.Name)
	}
	return names, nil
}

// Remove removes the named member, waiting up to 30 s while etcd refuses because the
// cluster would be left without a healthy quorum.
func (m *EtcdMembers) Remove(ctx context.Context, name string) error {
	cli, err := m.dial(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return etcd.Remove(ctx, cli, name)
}
