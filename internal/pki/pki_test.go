package pki

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A kept client certificate is reused only while it is still the one asked for; a file
// overwritten by something else (once, the metrics server's serving certificate took
// its client certificate's name) is issued anew instead of presented to the apiserver.
func TestLoadOrIssueClientReissuesWhatNoLongerFits(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	first, err := ca.LoadOrIssueClient(dir, "c", "alice", []string{"devs"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := ca.LoadOrIssueClient(dir, "c", "alice", []string{"devs"})
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CertPEM) != string(first.CertPEM) {
		t.Fatal("a fitting certificate was issued anew instead of kept")
	}

	other, err := LoadOrCreateCA(t.TempDir(), "ca", "other-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.IssueServing("svc", []string{"svc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.IssueClient("alice", []string{"devs"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		kept         *Issued
		user         string
		groups       []string
		wantReissued bool
	}{
		"same user and groups":     {first, "alice", []string{"devs"}, false},
		"another user":             {first, "bob", []string{"devs"}, true},
		"other groups":             {first, "alice", nil, true},
		"a serving certificate":    {serving, "svc", nil, true},
		"signed by another CA":     {foreign, "alice", []string{"devs"}, true},
		"cert and key of two sets": {&Issued{CertPEM: first.CertPEM, KeyPEM: serving.KeyPEM}, "alice", []string{"devs"}, true},
	} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, "c.crt"), tc.kept.CertPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "c.key"), tc.kept.KeyPEM, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ca.LoadOrIssueClient(d, "c", tc.user, tc.groups)
			if err != nil {
				t.Fatal(err)
			}
			if reissued := string(got.CertPEM) != string(tc.kept.CertPEM); reissued != tc.wantReissued {
				t.Fatalf("reissued = %v, want %v", reissued, tc.wantReissued)
			}
			if !ca.isClientFor(got, tc.user, tc.groups, time.Now()) {
				t.Fatal("the certificate returned is not a client certificate for the user asked")
			}
		})
	}
}

// A certificate expiring within RenewBefore is renewed by the next start.
func TestLoadOrIssueClientRenewsBeforeExpiry(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, "ca", "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	issued, err := ca.IssueClient("alice", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.isClientFor(issued, "alice", nil, time.Now()) {
		t.Fatal("a new certificate should fit")
	}
	if ca.isClientFor(issued, "alice", nil, time.Now().AddDate(1, 0, 0).Add(-RenewBefore+time.Hour)) {
		t.Fatal("a certificate within RenewBefore of its expiry should be renewed")
	}
}
