package etcdsnapshot

import (
	"path/filepath"
	"testing"

	"mizzen/internal/datadir"
)

// The etcd CA files a joining server receives are named relative to the data
// directory: under any root they are exactly the files the server's own etcd clients
// use, and their names on the wire stay what servers already exchange.
func TestSharedCAFilesAreTheDataDirectorysOwn(t *testing.T) {
	root := t.TempDir()
	rel := SharedCAFiles()
	if want := []string{"tls/etcd/server-ca.crt", "tls/etcd/server-ca.key"}; len(rel) != 2 || rel[0] != want[0] || rel[1] != want[1] {
		t.Fatalf("shared CA files %v, want %v", rel, want)
	}
	if got, want := filepath.Join(root, rel[0]), EmbeddedClientFiles(datadir.Dir(root)).CAFile; got != want {
		t.Errorf("shared CA certificate %s, but etcd clients use %s", got, want)
	}
	if got, want := filepath.Dir(filepath.Join(root, rel[1])), datadir.Dir(root).EtcdTLS(); got != want {
		t.Errorf("shared CA key in %s, want %s", got, want)
	}
}
