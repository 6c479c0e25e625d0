package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestAloneMemberRestartsWithItsData: a member that keeps only aloneCatchUpEntries of
// its raft log in memory writes several times that many entries (so the log is
// snapshotted in memory and compacted many times over), stops, and starts again on
// the same data with every key and the same revision, and takes writes after it.
func TestAloneMemberRestartsWithItsData(t *testing.T) {
	ctx := context.Background()
	mc := MemberConfig{Name: "alone", DataDir: t.TempDir(), Alone: true}
	const n = 4 * aloneCatchUpEntries
	m, err := Start(ctx, mc, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := m.etcd.Server.Cfg.SnapshotCatchUpEntries; got != aloneCatchUpEntries {
		t.Fatalf("the member keeps %d catch-up entries, want %d", got, aloneCatchUpEntries)
	}
	cli := m.Client()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < 10; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 10 {
				if _, err := cli.Put(ctx, fmt.Sprintf("/k/%05d", i), fmt.Sprintf("v%d", i)); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	before, err := cli.Get(ctx, "/k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	m, err = Start(ctx, mc, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cli = m.Client()
	resp, err := cli.Get(ctx, "/k/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != n || resp.Header.Revision != before.Header.Revision {
		t.Fatalf("after the restart: %d keys at revision %d, want %d at %d", len(resp.Kvs), resp.Header.Revision, n, before.Header.Revision)
	}
	for i, kv := range resp.Kvs {
		if want := fmt.Sprintf("v%d", i); string(kv.Value) != want {
			t.Fatalf("%s = %q, want %q", kv.Key, kv.Value, want)
		}
	}
	for i := 0; i < 10; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/after/%d", i), "v"); err != nil {
			t.Fatalf("write after the restart: %v", err)
		}
	}
}
