package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"mizzen/internal/controlplane/core"
	"mizzen/internal/datadir"
	"mizzen/internal/etcd"
	"mizzen/internal/etcdsnapshot"
)

// ClusterReset is `mizzen server --cluster-reset`: with restorePath, the embedded etcd
// is replaced by a fresh single-member etcd holding that snapshot (the old member's data
// kept as DIR/etcd-old-UNIXTIME); without, the member's own data is kept and it forgets
// every other member. The server is not started: as k3s, it returns what to tell the
// user, which is to start again without the flag, so that a unit file left with the flag
// does not restore the snapshot again at every restart.
func ClusterReset(ctx context.Context, dataDir, restorePath string, log *slog.Logger) (string, error) {
	dir := datadir.Dir(dataDir)
	if err := refuseRunning(dir); err != nil {
		return "", fmt.Errorf("--cluster-reset: %w", err)
	}
	member, err := core.EtcdMemberOf(dir)
	if err != nil {
		return "", err
	}
	if restorePath != "" {
		if caPEM, err := os.ReadFile(dir.CACert()); err == nil {
			if err := etcdsnapshot.CheckCluster(restorePath, caPEM); err != nil {
				return "", fmt.Errorf("--cluster-reset-restore-path: %w (the etcd data in %s is unchanged)", err, dir.Etcd())
			}
		}
		old := dir.EtcdOld(time.Now().Unix())
		if err := etcdsnapshot.Restore(restorePath, dir.Etcd(), old, member); err != nil {
			return "", fmt.Errorf("--cluster-reset-restore-path: %w (the etcd data in %s is unchanged)", err, dir.Etcd())
		}
		msg := fmt.Sprintf("Etcd restored from %s into %s", restorePath, dir.Etcd())
		if _, err := os.Stat(old); err == nil {
			msg += fmt.Sprintf("; the previous data is in %s", old)
		}
		return msg + ". Restart without --cluster-reset now.", nil
	}
	if _, err := os.Stat(dir.Etcd()); err != nil {
		return "", fmt.Errorf("--cluster-reset: no etcd data in %s", dir.Etcd())
	}
	peerTLS, err := core.EmbeddedPeerTLS(dir, member.PeerURL)
	if err != nil {
		return "", err
	}
	m, err := etcd.Start(ctx, etcd.MemberConfig{Name: member.Name, DataDir: dir.Etcd(),
		PeerURLs: []string{member.PeerURL}, PeerTLS: peerTLS, ForceNewCluster: true}, log)
	if err != nil {
		return "", fmt.Errorf("--cluster-reset: %w", err)
	}
	m.Close()
	return "Managed etcd cluster membership has been reset, restart without --cluster-reset now.", nil
}

// refuseRunning fails when the data directory's server seems to be running: its etcd's
// client port still accepts connections.
func refuseRunning(dir datadir.Dir) error {
	raw, err := os.ReadFile(dir.EtcdClientURL())
	if err != nil {
		return nil
	}
	u, err := url.Parse(strings.TrimSpace(string(raw)))
	if err != nil {
		return nil
	}
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		return nil
	}
	_ = conn.Close()
	return fmt.Errorf("the server on %s is still running (its etcd answers at %s); stop it first", dir.Root(), u.Host)
}

// RemoveServer is `mizzen server --remove`: the stopped server on dataDir leaves its
// cluster of servers (core.LeaveCluster). It returns what to tell the user.
func RemoveServer(ctx context.Context, dataDir string) (string, error) {
	dir := datadir.Dir(dataDir)
	if err := refuseRunning(dir); err != nil {
		return "", fmt.Errorf("--remove: %w", err)
	}
	return core.LeaveCluster(ctx, dir)
}
