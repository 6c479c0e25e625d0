package storage_test

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"testing"

	"mizzen/internal/etcd"
	"mizzen/internal/storage"
)

func startStore(t *testing.T) (context.Context, *storage.Store) {
	t.Helper()
	ctx, member := startMember(t)
	return ctx, storage.NewStore(member.Client())
}

// startMember runs an embedded etcd member for the test, stopped when it ends.
func startMember(t *testing.T) (context.Context, *etcd.Member) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	member, err := etcd.Start(ctx, etcd.MemberConfig{DataDir: t.TempDir()}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { member.Close() })
	return ctx, member
}

// TestAllocations: an allocation is held by its first claimant until released, and a
// second claim reports the holder without taking it over.
func TestAllocations(t *testing.T) {
	ctx, store := startStore(t)
	ip := storage.ServiceIP("10.0.0.5")
	created, holder, err := store.Claim(ctx, ip, "default/a")
	if err != nil || !created || holder != "default/a" {
		t.Fatalf("first claim: created=%v holder=%q err=%v", created, holder, err)
	}
	created, holder, err = store.Claim(ctx, ip, "default/b")
	if err != nil || created || holder != "default/a" {
		t.Fatalf("second claim: created=%v holder=%q err=%v, want held by default/a", created, holder, err)
	}
	// A node port with the same text is a different allocation.
	if created, _, err := store.Claim(ctx, storage.NodePort(30005), "default/b"); err != nil || !created {
		t.Fatalf("node port claim: created=%v err=%v", created, err)
	}
	if err := store.Release(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if created, holder, err := store.Claim(ctx, ip, "default/b"); err != nil || !created || holder != "default/b" {
		t.Fatalf("claim after release: created=%v holder=%q err=%v", created, holder, err)
	}
}

// TestAPIServerLeases: a refreshed lease lists its address; a withdrawn one does not.
func TestAPIServerLeases(t *testing.T) {
	ctx, store := startStore(t)
	a, b := store.APIServerLease(net.ParseIP("192.0.2.1")), store.APIServerLease(net.ParseIP("192.0.2.2"))
	for _, l := range []*storage.APIServerLease{a, b, a} {
		if err := l.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ips, err := store.LiveAPIServers(ctx)
	if err != nil || !slices.Equal(ips, []string{"192.0.2.1", "192.0.2.2"}) {
		t.Fatalf("live: %v %v", ips, err)
	}
	if err := a.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	if ips, err := store.LiveAPIServers(ctx); err != nil || !slices.Equal(ips, []string{"192.0.2.2"}) {
		t.Fatalf("live after withdraw: %v %v", ips, err)
	}
}
