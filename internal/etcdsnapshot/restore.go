package etcdsnapshot

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Member is how the restored member is named and reached by peers; it must be what
// the server starts its embedded member with, or etcd refuses the restored data.
type Member struct {
	Name    string
	PeerURL string
}

// revisionBump lifts the restored revision above any a client may have seen before the
// restore (etcd's advice for Kubernetes), so no watch or resourceVersion goes back in
// time; the revisions in between are marked compacted.
const revisionBump = 1_000_000_000

// Restore makes etcdDir a fresh single-member etcd holding the snapshot's data. The
// snapshot is checked first (whole, its hash, an etcd database) and restored beside
// etcdDir; only when all of that succeeded is the old etcdDir moved to oldDir (when it
// exists) and the restored one put in its place. On any error etcdDir is untouched.
func Restore(snapshotPath, etcdDir, oldDir string, m Member) (err error) {
	if err := Verify(snapshotPath); err != nil {
		return err
	}
	if err := checkDatabase(snapshotPath); err != nil {
		return err
	}
	if _, err := os.Stat(oldDir); err == nil {
		return fmt.Errorf("%s already exists", oldDir)
	}
	tmp := fmt.Sprintf("%s.restore-%d", etcdDir, time.Now().UnixNano())
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("restoring %s: %v", snapshotPath, r)
		}
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                m.Name,
		OutputDataDir:       tmp,
		PeerURLs:            []string{m.PeerURL},
		InitialCluster:      m.Name + "=" + m.PeerURL,
		InitialClusterToken: "etcd-cluster",
		RevisionBump:        revisionBump,
		MarkCompacted:       true,
	})
	if err != nil {
		return fmt.Errorf("restoring %s: %w", snapshotPath, err)
	}
	if _, err := os.Stat(etcdDir); err == nil {
		if err := os.Rename(etcdDir, oldDir); err != nil {
			return err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, etcdDir); err != nil {
		// Put the old data back rather than leave no member at all.
		_ = os.Rename(oldDir, etcdDir)
		return err
	}
	return nil
}

// checkDatabase opens the snapshot as a bbolt database and looks for etcd's key
// bucket, so that a file with a valid hash that is no etcd database is refused
// before etcd's restore (which panics on one).
func checkDatabase(path string) error {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s is not an etcd snapshot: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("key")) == nil || tx.Bucket([]byte("meta")) == nil {
			return fmt.Errorf("%s is not an etcd snapshot: it holds no etcd keys", path)
		}
		return nil
	})
}
