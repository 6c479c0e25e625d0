// Package etcdsnapshot takes, lists, prunes and restores etcd snapshots, as k3s's
// `etcd-snapshot` commands and `server --cluster-reset` do: a snapshot is the file etcd's
// Snapshot API streams (the bbolt database followed by its sha256), named
// NAME-NODE-UNIXTIME and kept in the data directory's db/snapshots.
package etcdsnapshot

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// OnDemandName is the name of snapshots taken by `mizzen etcd-snapshot save`, and
// ScheduledName of those the server takes on its schedule (k3s's names).
const (
	OnDemandName  = "on-demand"
	ScheduledName = "etcd-snapshot"
)

// Snapshot is one snapshot file.
type Snapshot struct {
	Name string
	// Path is the file's absolute path.
	Path    string
	Size    int64
	Created time.Time
}

// Location is the snapshot's URL, as k3s lists it.
func (s Snapshot) Location() string { return "file://" + s.Path }

// FileName is the name a snapshot taken at t by node gets: NAME-NODE-UNIXTIME.
func FileName(name, node string, t time.Time) string {
	return fmt.Sprintf("%s-%s-%d", name, node, t.Unix())
}

var unixSuffix = regexp.MustCompile(`-([0-9]+)$`)

// List returns the snapshots in dir, oldest first. A file is a snapshot when its name
// ends in -UNIXTIME; its creation time is that time. A missing dir has none.
func List(dir string) ([]Snapshot, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var out []Snapshot
	for _, e := range entries {
		m := unixSuffix.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		sec, _ := strconv.ParseInt(m[1], 10, 64)
		out = append(out, Snapshot{Name: e.Name(), Path: filepath.Join(abs, e.Name()), Size: info.Size(), Created: time.Unix(sec, 0).UTC()})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Save streams a snapshot from the member cli reaches into dir as
// NAME-NODE-UNIXTIME, checking the stream's sha256 before the file takes its name, so
// a cut stream never leaves a snapshot behind.
func Save(ctx context.Context, cli *clientv3.Client, dir, name, node string, now time.Time) (Snapshot, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Snapshot{}, err
	}
	final := filepath.Join(dir, FileName(name, node, now))
	if _, err := os.Stat(final); err == nil {
		return Snapshot{}, fmt.Errorf("snapshot %s already exists", final)
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("requesting a snapshot: %w", err)
	}
	defer rc.Close()
	part := final + ".part"
	f, err := os.OpenFile(part, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Snapshot{}, err
	}
	defer os.Remove(part)
	size, err := io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("receiving the snapshot: %w", err)
	}
	if err := Verify(part); err != nil {
		return Snapshot{}, fmt.Errorf("the snapshot received: %w", err)
	}
	if err := os.Rename(part, final); err != nil {
		return Snapshot{}, err
	}
	abs, _ := filepath.Abs(final)
	return Snapshot{Name: filepath.Base(final), Path: abs, Size: size, Created: time.Unix(now.Unix(), 0).UTC()}, nil
}

// Delete removes the named snapshots from dir; a name that is no snapshot there is an
// error, after the others are removed.
func Delete(dir string, names ...string) ([]string, error) {
	var deleted []string
	var errs []error
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, `/\`) || n == "." || n == ".." {
			errs = append(errs, fmt.Errorf("%q: not a snapshot name", n))
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("snapshot %s not found in %s", n, dir)
			}
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, n)
	}
	return deleted, errors.Join(errs...)
}

// Prune removes the snapshots of dir named NAME-NODE-* beyond the retention newest,
// and returns the names it removed. Snapshots of other names or nodes are left alone,
// as k3s prunes only its own node's snapshots of one name.
func Prune(dir, name, node string, retention int) ([]string, error) {
	if retention < 1 {
		return nil, fmt.Errorf("snapshot retention must be at least 1, not %d", retention)
	}
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	prefix := name + "-" + node + "-"
	var mine []Snapshot
	for _, s := range all {
		if rest, ok := strings.CutPrefix(s.Name, prefix); ok && isDigits(rest) {
			mine = append(mine, s)
		}
	}
	if len(mine) <= retention {
		return nil, nil
	}
	var names []string
	for _, s := range mine[:len(mine)-retention] {
		names = append(names, s.Name)
	}
	return Delete(dir, names...)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Verify checks that path is a whole snapshot as etcd's Snapshot API streams it: a
// database whose sha256 follows it. A truncated file, or one that is no snapshot, fails.
func Verify(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	// etcd's database is whole pages (a multiple of 512 bytes); the hash is appended.
	n := info.Size()
	if n < 512+sha256.Size || n%512 != sha256.Size {
		return fmt.Errorf("%s is not an etcd snapshot, or it is truncated (%d bytes: a snapshot is a database of whole pages followed by its sha256)", path, n)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, n-sha256.Size); err != nil {
		return err
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return err
	}
	if got := h.Sum(nil); string(got) != string(want) {
		return fmt.Errorf("%s: the snapshot's sha256 does not match its content (corrupt or truncated)", path)
	}
	return nil
}

// NodeName is the node name snapshot files carry by default: the host's name, as k3s's
// node name defaults to it.
func NodeName() string {
	h, _ := os.Hostname()
	if h == "" {
		return "mizzen"
	}
	return strings.ToLower(h)
}
