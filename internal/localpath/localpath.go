// Package localpath is the node half of mizzen's bundled local-path storage (the
// controller half, which creates and deletes the PersistentVolumes, is
// internal/controller/localpath). A provisioned volume is a hostPath directory
// DIR/<pv>_<namespace>_<claim> on the node the scheduler chose, where DIR is the node's
// --local-path-dir, which the kubelet advertises in the node annotation NodeDirAnnotation.
// The kubelet creates the directory when it first mounts it, and the Sweeper, running
// beside the kubelet, removes it once its PersistentVolume is gone from the API and its
// reclaim policy was Delete. Doing the disk work on the node, from the kubelet's own
// credentials (which may only read PersistentVolumes), needs no helper pod and so no
// helper image on every node, and works on every node of the cluster.
package localpath

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Names shared by the node and controller halves.
const (
	// Provisioner is the StorageClass provisioner the controller serves.
	Provisioner = "mizzen.io/local-path"
	// ClassName is the default StorageClass created for it.
	ClassName = "local-path"
	// NodeDirAnnotation on a Node names its local-path directory; a node without it
	// offers no local-path storage.
	NodeDirAnnotation = "mizzen.io/local-path-dir"
	// metaDir, under the local-path directory, keeps each volume's last seen reclaim
	// policy, so that a volume deleted while its node was away is still reclaimed (or
	// kept) as it said.
	metaDir = ".reclaim"
)

// DirName is the directory of volume pv for claim namespace/name.
func DirName(pv, namespace, claim string) string {
	return pv + "_" + namespace + "_" + claim
}

// IsLocalPath reports whether pv was provisioned by the local-path provisioner.
func IsLocalPath(pv *v1.PersistentVolume) bool {
	return pv.Annotations["pv.kubernetes.io/provisioned-by"] == Provisioner
}

// Sweeper removes the directories of deleted local-path volumes on one node.
type Sweeper struct {
	Client kubernetes.Interface
	Dir    string
	Period time.Duration
	Logger *slog.Logger
}

// Run sweeps every Period until ctx ends.
func (s *Sweeper) Run(ctx context.Context) {
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for {
		s.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep looks at every volume directory once: a volume still in the API has its reclaim
// policy recorded; one gone from the API has its directory removed if that policy was
// Delete, and kept (for an admin) otherwise.
func (s *Sweeper) Sweep(ctx context.Context) {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		if !os.IsNotExist(err) {
			s.Logger.Warn("local-path: cannot read the storage directory", "dir", s.Dir, "err", err)
		}
		return
	}
	for _, e := range entries {
		name := e.Name()
		pvName, _, ok := strings.Cut(name, "_")
		if !e.IsDir() || !ok || name == metaDir {
			continue
		}
		policyFile := policyPath(s.Dir, pvName)
		pv, err := s.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
		switch {
		case err == nil:
			if pv.Spec.HostPath == nil || pv.Spec.HostPath.Path != filepath.Join(s.Dir, name) {
				continue // not the volume of this directory
			}
			if err := Record(s.Dir, pvName, pv.Spec.PersistentVolumeReclaimPolicy); err != nil {
				s.Logger.Warn("local-path: cannot record a reclaim policy", "volume", pvName, "err", err)
			}
		case apierrors.IsNotFound(err):
			policy, readErr := os.ReadFile(policyFile)
			if readErr != nil || string(policy) != string(v1.PersistentVolumeReclaimDelete) {
				continue // never seen, or Retain: an admin's to reclaim
			}
			if err := os.RemoveAll(filepath.Join(s.Dir, name)); err != nil {
				s.Logger.Warn("local-path: cannot delete a volume's directory", "volume", pvName, "err", err)
				continue
			}
			_ = os.Remove(policyFile)
			s.Logger.Info("local-path: deleted the directory of a deleted volume", "volume", pvName, "dir", filepath.Join(s.Dir, name))
		default:
			s.Logger.Debug("local-path: cannot read a volume", "volume", pvName, "err", err)
		}
	}
}

func policyPath(dir, pv string) string { return filepath.Join(dir, metaDir, pv) }

// Record notes volume pv's reclaim policy on the node; the kubelet calls it when it sets
// the volume up, the Sweeper each time it sees the volume.
func Record(dir, pv string, policy v1.PersistentVolumeReclaimPolicy) error {
	path := policyPath(dir, pv)
	if old, err := os.ReadFile(path); err == nil && string(old) == string(policy) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(policy), 0o600)
}
