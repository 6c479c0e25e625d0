package etcdsnapshot

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/storage"
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

// clusterInfoKey is where the apiserver stores kube-public/cluster-info, which names
// the cluster's CA.
const clusterInfoKey = "/registry/configmaps/kube-public/cluster-info"

// ClusterCA is the CA certificate (PEM) the snapshot's kube-public/cluster-info names:
// whose cluster the snapshot is of. Nil when the snapshot holds no cluster-info (a
// snapshot of a cluster that never published it).
func ClusterCA(snapshotPath string) ([]byte, error) {
	if err := checkDatabase(snapshotPath); err != nil {
		return nil, err
	}
	db, err := bolt.Open(snapshotPath, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var latest []byte
	err = db.View(func(tx *bolt.Tx) error {
		// Keys are revisions in ascending order; a tombstone's ends in 't'.
		return tx.Bucket([]byte("key")).ForEach(func(rev, value []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(value, &kv); err != nil {
				return fmt.Errorf("%s: a damaged key at revision %x: %w", snapshotPath, rev, err)
			}
			if string(kv.Key) != clusterInfoKey {
				return nil
			}
			if len(rev) > 0 && rev[len(rev)-1] == 't' {
				latest = nil
			} else {
				latest = kv.Value
			}
			return nil
		})
	})
	if err != nil || latest == nil {
		return nil, err
	}
	var cm corev1.ConfigMap
	if err := storage.Decode(latest, &cm); err != nil {
		return nil, fmt.Errorf("%s: kube-public/cluster-info: %w", snapshotPath, err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil {
		return nil, fmt.Errorf("%s: kube-public/cluster-info holds no kubeconfig: %w", snapshotPath, err)
	}
	for _, c := range cfg.Clusters {
		return c.CertificateAuthorityData, nil
	}
	return nil, nil
}

// CheckCluster refuses a snapshot of another cluster than the one whose CA certificate
// is caPEM: restored, its objects (tokens, certificates, cluster-info) would not match
// the data directory's keys. A snapshot naming no CA is accepted.
func CheckCluster(snapshotPath string, caPEM []byte) error {
	if err := Verify(snapshotPath); err != nil {
		return err
	}
	snapCA, err := ClusterCA(snapshotPath)
	if err != nil || snapCA == nil {
		return err
	}
	if !sameCertificate(snapCA, caPEM) {
		return fmt.Errorf("%s is a snapshot of another cluster: its CA is not this data directory's; restore it with the data directory (tls/) of the cluster it was taken from", snapshotPath)
	}
	return nil
}

// sameCertificate tells whether two PEM blocks hold the same first certificate.
func sameCertificate(a, b []byte) bool {
	ba, _ := pem.Decode(a)
	bb, _ := pem.Decode(b)
	return ba != nil && bb != nil && bytes.Equal(ba.Bytes, bb.Bytes)
}
