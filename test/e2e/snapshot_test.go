package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"mizzen/internal/pki"
)

// Flags that keep this file's servers off other tests' networks (no agent runs).
var snapshotServerArgs = []string{"--disable", "agent,dns,metrics-server,ingress,dashboard", "--cluster-cidr", "10.239.0.0/16",
	"--service-cluster-ip-range", "10.121.0.0/16", "--pod-bridge", "mzn-snap"}

// mizzenCmd runs a mizzen subcommand and returns its combined output and error.
func mizzenCmd(args ...string) (string, error) {
	out, err := exec.Command(mizzenBin, args...).CombinedOutput()
	return string(out), err
}

func snapConfigMaps(t *testing.T, c *cluster) map[string]string {
	t.Helper()
	list, err := clientFor(t, c).CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{LabelSelector: "test=snap"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = cm.Data["v"]
	}
	return out
}

// A user saves a snapshot of a running server, changes the cluster, stops it, restores
// the snapshot with --cluster-reset into the same data directory and starts it again:
// exactly the snapshot's objects are back and new writes succeed. A truncated snapshot is
// refused first, and leaves the data as it was.
func TestEtcdSnapshotSaveRestore(t *testing.T) {
	sideBySide(t)
	dataDir := t.TempDir()
	port := freePort(t)
	c := startServer(t, dataDir, port, snapshotServerArgs...)
	client := clientFor(t, c)
	ctx := context.Background()
	create := func(name, value string) {
		t.Helper()
		_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"test": "snap"}}, Data: map[string]string{"v": value}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cm-1", "cm-2", "cm-3"} {
		create(n, "before")
	}
	c.kubectl("create", "namespace", "snapns")
	c.kubectl("-n", "snapns", "create", "secret", "generic", "s", "--from-literal=k=v")

	out, err := mizzenCmd("etcd-snapshot", "save", "--data-dir", dataDir, "--name", "e2e")
	if err != nil || !strings.HasPrefix(out, "Snapshot e2e-") {
		t.Fatalf("save: %v\n%s", err, out)
	}
	name := strings.Fields(out)[1]
	out, err = mizzenCmd("etcd-snapshot", "list", "--data-dir", dataDir)
	if err != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !slices.Equal(strings.Fields(lines[0]), []string{"Name", "Location", "Size", "Created"}) ||
		strings.Fields(lines[1])[0] != name || strings.Fields(lines[1])[1] != "file://"+filepath.Join(dataDir, "db", "snapshots", name) {
		t.Fatalf("list:\n%s", out)
	}
	snapshot := filepath.Join(dataDir, "db", "snapshots", name)

	// Changes after the snapshot, which the restore must undo.
	create("cm-4", "after")
	if err := client.CoreV1().ConfigMaps("default").Delete(ctx, "cm-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.kubectl("patch", "configmap", "cm-2", "-p", `{"data":{"v":"changed"}}`)
	c.kubectl("delete", "namespace", "snapns", "--wait=false")

	if out, err := mizzenCmd("server", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", snapshot); err == nil ||
		!strings.Contains(out, "still running") {
		t.Fatalf("a reset under a running server: %v\n%s", err, out)
	}
	c.stop()

	data, err := os.ReadFile(snapshot)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated")
	if err := os.WriteFile(truncated, data[:len(data)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = mizzenCmd("server", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", truncated)
	if err == nil || !strings.Contains(out, "truncated") || !strings.Contains(out, "unchanged") {
		t.Fatalf("a truncated snapshot: %v\n%s", err, out)
	}
	if old, _ := filepath.Glob(filepath.Join(dataDir, "etcd-old-*")); len(old) != 0 {
		t.Fatalf("a refused restore moved the data: %v", old)
	}
	c = startServer(t, dataDir, port, snapshotServerArgs...)
	if got := snapConfigMaps(t, c); len(got) != 3 || got["cm-2"] != "changed" || got["cm-4"] != "after" {
		t.Fatalf("after a refused restore: %v", got)
	}
	c.stop()

	out, err = mizzenCmd("server", "--data-dir", dataDir, "--cluster-reset", "--cluster-reset-restore-path", snapshot)
	if err != nil || !strings.Contains(out, "Restart without --cluster-reset") {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if old, _ := filepath.Glob(filepath.Join(dataDir, "etcd-old-*")); len(old) != 1 {
		t.Fatalf("the old data is not kept aside: %v", old)
	}
	c = startServer(t, dataDir, port, snapshotServerArgs...)
	client = clientFor(t, c)
	if got := snapConfigMaps(t, c); len(got) != 3 || got["cm-1"] != "before" || got["cm-2"] != "before" || got["cm-3"] != "before" {
		t.Fatalf("restored: %v", got)
	}
	if out := c.kubectl("-n", "snapns", "get", "secret", "s", "-o", "jsonpath={.data.k}"); out != "dg==" {
		t.Fatalf("restored secret: %q", out)
	}
	create("cm-5", "new")
	if got := snapConfigMaps(t, c); len(got) != 4 || got["cm-5"] != "new" {
		t.Fatalf("a write after the restore: %v", got)
	}

	// delete and prune remove files and nothing else.
	if out, err := mizzenCmd("etcd-snapshot", "save", "--data-dir", dataDir, "--name", "second"); err != nil {
		t.Fatalf("save: %v\n%s", err, out)
	}
	if out, err := mizzenCmd("etcd-snapshot", "prune", "--data-dir", dataDir, "--name", "e2e", "--snapshot-retention", "1"); err != nil || out != "" {
		t.Fatalf("prune with one e2e snapshot: %v %q", err, out)
	}
	if out, err := mizzenCmd("etcd-snapshot", "delete", "--data-dir", dataDir, name); err != nil || !strings.Contains(out, name+" deleted") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	out, _ = mizzenCmd("etcd-snapshot", "ls", "--data-dir", dataDir)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "second-") {
		t.Fatalf("left:\n%s", out)
	}
}

// `mizzen certificate rotate` reissues every certificate from the same CA: the rewritten
// admin kubeconfig works at once, a copy taken before still works (same CA), and both
// work after the server restarts on the rotated certificates.
func TestCertificateCheckRotate(t *testing.T) {
	dataDir := t.TempDir()
	port := freePort(t)
	c := startServer(t, dataDir, port, snapshotServerArgs...)
	out, err := mizzenCmd("certificate", "check", "--data-dir", dataDir)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for file, want := range map[string][]string{
		"tls/ca.crt":          {"tls/ca.crt", "", "<none>", "CA"},
		"tls/admin.crt":       {"tls/admin.crt", "system:admin", "system:masters", "ClientAuth"},
		"admin.kubeconfig":    {"admin.kubeconfig", "system:admin", "system:masters", "ClientAuth"},
		"tls/etcd/client.crt": {"tls/etcd/client.crt", "etcd-client", "<none>", "ClientAuth"},
		// issued at every start, kept on disk for this list
		"tls/serving-kube-apiserver.crt": {"tls/serving-kube-apiserver.crt", "kube-apiserver", "<none>", "ServerAuth"},
	} {
		got := rows[file]
		if len(got) < 4 || want[1] != "" && got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
			t.Fatalf("check lists %s as %v:\n%s", file, got, out)
		}
	}
	if strings.Contains(out, "RENEW") || strings.Contains(out, "EXPIRED") {
		t.Fatalf("fresh certificates due:\n%s", out)
	}
	before, _ := os.ReadFile(c.kubeconfig)
	caBefore, _ := os.ReadFile(filepath.Join(dataDir, "tls", "ca.crt"))
	oldCopy := filepath.Join(t.TempDir(), "old.kubeconfig")
	if err := os.WriteFile(oldCopy, before, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = mizzenCmd("certificate", "rotate", "--data-dir", dataDir)
	if err != nil || !strings.Contains(out, "Certificate admin rotated.") || strings.Contains(out, "Certificate ca rotated") {
		t.Fatalf("rotate: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(c.kubeconfig); bytes.Equal(before, after) {
		t.Fatal("the admin kubeconfig was not rewritten")
	}
	if caAfter, _ := os.ReadFile(filepath.Join(dataDir, "tls", "ca.crt")); !bytes.Equal(caBefore, caAfter) {
		t.Fatal("rotate made a new CA")
	}
	check := func(kubeconfig string) {
		t.Helper()
		out, err := exec.Command(mizzenBin, "kubectl", "--kubeconfig", kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").CombinedOutput()
		if err != nil || string(out) != "system:admin" {
			t.Fatalf("kubectl with %s: %v %s", kubeconfig, err, out)
		}
	}
	check(c.kubeconfig)
	check(oldCopy)
	if out, err := mizzenCmd("certificate", "rotate", "--data-dir", dataDir, "--service", "nope"); err == nil {
		t.Fatalf("an unknown service: %s", out)
	}
	c.stop()

	// A client certificate 30 days from expiry is due, and the next start renews it
	// (k3s's 90-day rule), from the same CA.
	ca, err := pki.LoadOrCreateCA(filepath.Join(dataDir, "tls"), "ca", "")
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1),
		Subject:   pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	_ = os.WriteFile(filepath.Join(dataDir, "tls", "admin.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	_ = os.WriteFile(filepath.Join(dataDir, "tls", "admin.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	status := func(file string) string {
		t.Helper()
		out, err := mizzenCmd("certificate", "check", "--data-dir", dataDir)
		if err != nil {
			t.Fatalf("check: %v\n%s", err, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == file {
				return f[len(f)-1]
			}
		}
		t.Fatalf("%s not listed:\n%s", file, out)
		return ""
	}
	if got := status("tls/admin.crt"); got != "RENEW" {
		t.Fatalf("a certificate 30 days from expiry is %s", got)
	}
	c = startServer(t, dataDir, port, snapshotServerArgs...)
	if got, kc := status("tls/admin.crt"), status("admin.kubeconfig"); got != "OK" || kc != "OK" {
		t.Fatalf("after a start: admin.crt %s, admin.kubeconfig %s", got, kc)
	}
	check(c.kubeconfig)
	check(oldCopy)
}
