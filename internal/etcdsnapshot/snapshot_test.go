package etcdsnapshot

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"mizzen/internal/etcd"
	"mizzen/internal/jointoken"
	"mizzen/internal/pki"
	"mizzen/internal/storage"
)

func TestFileName(t *testing.T) {
	if got := FileName("on-demand", "node-1", time.Unix(1700000000, 0)); got != "on-demand-node-1-1700000000" {
		t.Fatalf("got %s", got)
	}
}

func touch(t *testing.T, dir, name string, size int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
}

func names(list []Snapshot) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out
}

func TestListOldestFirstAndOnlySnapshots(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "on-demand-n-300", 3)
	touch(t, dir, "on-demand-n-100", 1)
	touch(t, dir, "etcd-snapshot-n-200", 2)
	touch(t, dir, "notes.txt", 1)
	touch(t, dir, "on-demand-n-400.part", 1)
	all, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"on-demand-n-100", "etcd-snapshot-n-200", "on-demand-n-300"}; !slices.Equal(names(all), want) {
		t.Fatalf("got %v, want %v", names(all), want)
	}
	if all[0].Size != 1 || !all[0].Created.Equal(time.Unix(100, 0)) || all[0].Location() != "file://"+filepath.Join(dir, "on-demand-n-100") {
		t.Fatalf("got %+v", all[0])
	}
	if none, err := List(filepath.Join(dir, "missing")); err != nil || len(none) != 0 {
		t.Fatalf("a missing directory: %v %v", none, err)
	}
}

func TestPruneKeepsNewestOfItsNameAndNode(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"etcd-snapshot-a-1", "etcd-snapshot-a-2", "etcd-snapshot-a-3", "etcd-snapshot-a-4",
		"etcd-snapshot-b-1", "on-demand-a-1", "etcd-snapshot-a-x-1"} {
		touch(t, dir, n, 1)
	}
	pruned, err := Prune(dir, "etcd-snapshot", "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"etcd-snapshot-a-1", "etcd-snapshot-a-2"}; !slices.Equal(pruned, want) {
		t.Fatalf("pruned %v, want %v", pruned, want)
	}
	all, _ := List(dir)
	if want := []string{"etcd-snapshot-a-x-1", "etcd-snapshot-b-1", "on-demand-a-1", "etcd-snapshot-a-3", "etcd-snapshot-a-4"}; !slices.Equal(names(all), want) {
		t.Fatalf("left %v, want %v", names(all), want)
	}
	if _, err := Prune(dir, "etcd-snapshot", "a", 0); err == nil {
		t.Fatal("retention 0 accepted")
	}
}

func TestDeleteRefusesPathsAndReportsMissing(t *testing.T) {
	dir := t.TempDir()
	touch(t, dir, "on-demand-n-1", 1)
	outside := filepath.Join(t.TempDir(), "keep-n-1")
	touch(t, filepath.Dir(outside), "keep-n-1", 1)
	deleted, err := Delete(dir, "on-demand-n-1", "../"+filepath.Base(filepath.Dir(outside))+"/keep-n-1", "missing-n-2")
	if !slices.Equal(deleted, []string{"on-demand-n-1"}) || err == nil || !strings.Contains(err.Error(), "missing-n-2 not found") {
		t.Fatalf("deleted %v, err %v", deleted, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a file outside the snapshot directory was removed: %v", err)
	}
}

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule(DefaultSchedule)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 3, 1, 5, 30, 0, 0, time.Local)
	next := s.Next(from)
	if want := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local); !next.Equal(want) {
		t.Fatalf("next after %v: %v, want %v", from, next, want)
	}
	if next2 := s.Next(next); !next2.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.Local)) {
		t.Fatalf("then %v", next2)
	}
	s, err = ParseSchedule("15 3 * * mon-fri")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-03-07 is a Saturday: the next weekday is Monday the 9th.
	if got := s.Next(time.Date(2026, 3, 7, 0, 0, 0, 0, time.Local)); !got.Equal(time.Date(2026, 3, 9, 3, 15, 0, 0, time.Local)) {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"", "* * * *", "61 * * * *", "* * * * * *", "every day"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// startMember runs a real etcd member serving clients on a loopback port.
func startMember(t *testing.T, dir string) (*etcd.Member, *clientv3.Client) {
	t.Helper()
	m, err := etcd.Start(context.Background(), etcd.MemberConfig{Name: "mizzen", DataDir: dir,
		PeerURLs: []string{"http://127.0.0.1:0"}, ClientURLs: []string{"http://127.0.0.1:0"}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := etcd.Dial(context.Background(), m.ClientURLs()[0], nil)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return m, cli
}

func put(t *testing.T, cli *clientv3.Client, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if _, err := cli.Put(context.Background(), kv[i], kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	resp, err := cli.Get(context.Background(), "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out
}

var testMember = Member{Name: "mizzen", PeerURL: "http://127.0.0.1:0"}

// A restore brings back exactly the snapshot's keys into the same directory, keeps the
// old data aside, and takes new writes; bad snapshots leave the data untouched.
func TestSaveAndRestoreRealEtcd(t *testing.T) {
	root := t.TempDir()
	etcdDir, snapDir := filepath.Join(root, "etcd"), filepath.Join(root, "snapshots")
	m, cli := startMember(t, etcdDir)
	put(t, cli, "/k/a", "1", "/k/b", "2", "/k/c", "3")
	snap, err := Save(context.Background(), cli, snapDir, OnDemandName, "n", time.Unix(1000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Name != "on-demand-n-1000" || snap.Size%512 != 32 {
		t.Fatalf("snapshot %+v", snap)
	}
	put(t, cli, "/k/d", "4", "/k/a", "changed")
	if _, err := cli.Delete(context.Background(), "/k/b"); err != nil {
		t.Fatal(err)
	}
	_ = cli.Close()
	m.Close()

	// Bad input: refused, and the member's data is as it was.
	data, _ := os.ReadFile(snap.Path)
	bad := map[string][]byte{
		"truncated": data[:len(data)/2],
		"notasnap":  []byte("hello"),
		"badhash":   append(append([]byte{}, data[:len(data)-1]...), data[len(data)-1]^0xff),
		"zeros":     make([]byte, 4096+32),
	}
	for name, content := range bad {
		path := filepath.Join(root, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Restore(path, etcdDir, filepath.Join(root, "etcd-old-"+name), testMember); err == nil {
			t.Fatalf("%s: restored", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(root, "etcd-old-"+name)); err == nil {
			t.Fatalf("%s: the old data was moved", name)
		}
	}
	m, cli = startMember(t, etcdDir)
	if got := keys(t, cli); len(got) != 3 || got["/k/a"] != "changed" || got["/k/d"] != "4" {
		t.Fatalf("after refused restores: %v", got)
	}
	_ = cli.Close()
	m.Close()

	old := filepath.Join(root, "etcd-old-1")
	if err := Restore(snap.Path, etcdDir, old, testMember); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(old, "member", "wal")); err != nil {
		t.Fatalf("old data not kept: %v", err)
	}
	m, cli = startMember(t, etcdDir)
	defer m.Close()
	defer cli.Close()
	if got := keys(t, cli); len(got) != 3 || got["/k/a"] != "1" || got["/k/b"] != "2" || got["/k/c"] != "3" {
		t.Fatalf("restored %v", got)
	}
	put(t, cli, "/k/e", "5")
	if got := keys(t, cli); got["/k/e"] != "5" {
		t.Fatalf("new write: %v", got)
	}
	resp, err := cli.Get(context.Background(), "/k/e")
	if err != nil || resp.Header.Revision < revisionBump {
		t.Fatalf("revision after restore %v (%v): not above the bump", resp.Header.Revision, err)
	}
}

type everySecond struct{}

func (everySecond) Next(t time.Time) time.Time { return t.Truncate(time.Second).Add(time.Second) }

func TestScheduledSnapshotsArePruned(t *testing.T) {
	root := t.TempDir()
	m, cli := startMember(t, filepath.Join(root, "etcd"))
	defer m.Close()
	defer cli.Close()
	url := m.ClientURLs()[0]
	snapDir := filepath.Join(root, "snapshots")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	s := &Scheduled{Schedule: everySecond{}, Retention: 2, Dir: snapDir, Node: "n", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Connect: func(ctx context.Context) (*clientv3.Client, error) {
			return Connect(ctx, "", External{Servers: url})
		}}
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		all, _ := List(snapDir)
		if len(all) == 2 && all[0].Created.Unix() > 0 {
			first := all[0].Created
			time.Sleep(2500 * time.Millisecond)
			all, _ = List(snapDir)
			if len(all) != 2 || !all[0].Created.After(first) {
				t.Fatalf("not pruned to 2 newer ones: %v", names(all))
			}
			for _, s := range all {
				if !strings.HasPrefix(s.Name, "etcd-snapshot-n-") {
					t.Fatalf("named %s", s.Name)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots: %v", names(all))
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A bbolt database with a valid hash that is no etcd database is refused before etcd's
// restore, which would panic on it.
func TestRestoreRefusesOtherDatabases(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("mine"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	data, _ := os.ReadFile(path)
	sum := sha256.Sum256(data)
	if err := os.WriteFile(path, append(data, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	etcdDir := filepath.Join(root, "etcd")
	err = Restore(path, etcdDir, filepath.Join(root, "etcd-old"), testMember)
	if err == nil || !strings.Contains(err.Error(), "holds no etcd keys") {
		t.Fatalf("got %v", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
}

// TestCheckCluster: a snapshot names the CA of its cluster through kube-public/
// cluster-info, as last written; a snapshot of another cluster is refused, one of this
// cluster or one without cluster-info is accepted.
func TestCheckCluster(t *testing.T) {
	root := t.TempDir()
	m, cli := startMember(t, filepath.Join(root, "etcd"))
	defer m.Close()
	defer cli.Close()
	ours, err := pki.LoadOrCreateCA(filepath.Join(root, "ours"), "ca", "ours")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := pki.LoadOrCreateCA(filepath.Join(root, "theirs"), "ca", "theirs")
	if err != nil {
		t.Fatal(err)
	}
	save := func(name string) string {
		t.Helper()
		snap, err := Save(context.Background(), cli, filepath.Join(root, "snapshots"), name, "n", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return snap.Path
	}
	putClusterInfo := func(caPEM []byte) {
		t.Helper()
		cm, err := jointoken.ClusterInfo("https://192.0.2.1:6443", caPEM)
		if err != nil {
			t.Fatal(err)
		}
		data, err := storage.Encode(cm)
		if err != nil {
			t.Fatal(err)
		}
		put(t, cli, clusterInfoKey, string(data))
	}
	none := save("none")
	putClusterInfo(theirs.CertPEM)
	putClusterInfo(ours.CertPEM) // the latest revision counts
	mine := save("ours")
	putClusterInfo(theirs.CertPEM)
	other := save("theirs")
	for _, tc := range []struct {
		path string
		ok   bool
	}{{none, true}, {mine, true}, {other, false}} {
		err := CheckCluster(tc.path, ours.CertPEM)
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "another cluster")) {
			t.Errorf("%s: %v, want accepted: %v", filepath.Base(tc.path), err, tc.ok)
		}
	}
}
