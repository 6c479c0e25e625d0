package etcd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mizzen/internal/pki"
	"mizzen/internal/testing/freeport"
)

func freePort(t *testing.T) int { return freeport.Get(t) }

// memberTLS issues a member's serving and peer certificates of ca into dir.
func memberTLS(t *testing.T, ca *pki.CA, dir, name string) (client, peer *TLSFiles) {
	t.Helper()
	caFile := filepath.Join(dir, "ca.crt")
	write := func(kind string, issued *pki.Issued, err error) *TLSFiles {
		if err != nil {
			t.Fatal(err)
		}
		f := &TLSFiles{CertFile: filepath.Join(dir, name+"-"+kind+".crt"), KeyFile: filepath.Join(dir, name+"-"+kind+".key"), CAFile: caFile}
		if err := os.WriteFile(f.CertFile, issued.CertPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.KeyFile, issued.KeyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	s, err := ca.IssueServing(name, nil, ips)
	client = write("server", s, err)
	p, err := ca.IssuePeer(name, nil, ips)
	peer = write("peer", p, err)
	return client, peer
}

// TestJoinAsLearnerOverMutualTLS: a second member joins a running one through the
// member API as a learner, peers over mutual TLS, is promoted once caught up, sees
// the first member's data, and is removed again cleanly.
func TestJoinAsLearnerOverMutualTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ca, err := pki.LoadOrCreateCA(dir, "ca", "etcd-ca")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	url := func() string { return fmt.Sprintf("https://127.0.0.1:%d", freePort(t)) }

	clientA, peerA := memberTLS(t, ca, dir, "a")
	peerURLA, clientURLA := url(), url()
	a, err := Start(ctx, MemberConfig{Name: "a", DataDir: filepath.Join(dir, "a"), PeerURLs: []string{peerURLA},
		ClientURLs: []string{clientURLA}, ClientTLS: clientA, PeerTLS: peerA, InitialCluster: "a=" + peerURLA}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Client().Put(ctx, "/before-join", "x"); err != nil {
		t.Fatal(err)
	}

	user, err := ca.IssueClient("root", nil)
	if err != nil {
		t.Fatal(err)
	}
	userFiles := &TLSFiles{CAFile: clientA.CAFile, CertFile: filepath.Join(dir, "user.crt"), KeyFile: filepath.Join(dir, "user.key")}
	_ = os.WriteFile(userFiles.CertFile, user.CertPEM, 0o600)
	_ = os.WriteFile(userFiles.KeyFile, user.KeyPEM, 0o600)
	if _, err := Dial(ctx, clientURLA, nil); err == nil || !strings.Contains(err.Error(), "--etcd-cafile") {
		t.Errorf("dialing a TLS member without certificates: %v", err)
	}
	cli, err := Dial(ctx, clientURLA, userFiles)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	clientB, peerB := memberTLS(t, ca, dir, "b")
	peerURLB := url()
	id, initial, err := AddLearner(ctx, cli, "b", peerURLB)
	if err != nil {
		t.Fatal(err)
	}
	if want := "a=" + peerURLA + ",b=" + peerURLB; initial != want && initial != "b="+peerURLB+",a="+peerURLA {
		t.Errorf("initial cluster %q, want %q", initial, want)
	}
	b, err := Start(ctx, MemberConfig{Name: "b", DataDir: filepath.Join(dir, "b"), PeerURLs: []string{peerURLB},
		ClientURLs: []string{url()}, ClientTLS: clientB, PeerTLS: peerB, InitialCluster: initial, ClusterState: "existing"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := PromoteWhenReady(ctx, cli, id); err != nil {
		t.Fatal(err)
	}
	list, err := cli.MemberList(ctx)
	if err != nil || len(list.Members) != 2 || list.Members[0].IsLearner || list.Members[1].IsLearner {
		t.Fatalf("members after promotion: %v, %v", list, err)
	}
	got, err := b.Client().Get(ctx, "/before-join")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("the joined member reads %v, %v", got, err)
	}
	if err := Remove(ctx, cli, "b"); err != nil {
		t.Fatal(err)
	}
	if list, err := cli.MemberList(ctx); err != nil || len(list.Members) != 1 {
		t.Errorf("members after removal: %v, %v", list, err)
	}
	if err := Remove(ctx, cli, "b"); err != nil {
		t.Errorf("removing a removed member: %v", err)
	}
}
