package containerd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const registriesYAML = `
mirrors:
  registry.k8s.io:
    endpoint:
      - "http://127.0.0.1:5000"
      - "mirror.example.com:5443/v2-prefix"
  docker.io:
    endpoint: ["https://hub-mirror.example.com"]
  "*":
    endpoint: ["http://10.0.0.1:5000"]
configs:
  "mirror.example.com:5443":
    tls:
      ca_file: /etc/ssl/mirror-ca.pem
      cert_file: /etc/ssl/client.pem
      key_file: /etc/ssl/client-key.pem
  "private.example.com":
    auth:
      username: alice
      password: "s3cr\"et"
    tls:
      insecure_skip_verify: true
`

func TestRegistriesHostsFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registries.yaml")
	if err := os.WriteFile(path, []byte(registriesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := LoadRegistries(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "certs.d")
	if err := os.MkdirAll(filepath.Join(dir, "stale.example.com"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteHostsDir(dir, r); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"registry.k8s.io": `server = "https://registry.k8s.io"

[host."http://127.0.0.1:5000"]
  capabilities = ["pull", "resolve"]

[host."https://mirror.example.com:5443/v2-prefix"]
  capabilities = ["pull", "resolve"]
  ca = "/etc/ssl/mirror-ca.pem"
  client = [["/etc/ssl/client.pem", "/etc/ssl/client-key.pem"]]
`,
		"docker.io": `server = "https://registry-1.docker.io"

[host."https://hub-mirror.example.com"]
  capabilities = ["pull", "resolve"]
`,
		"_default": `
[host."http://10.0.0.1:5000"]
  capabilities = ["pull", "resolve"]
`,
		"private.example.com": `server = "https://private.example.com"

[host."https://private.example.com"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
`,
		"mirror.example.com:5443": `server = "https://mirror.example.com:5443"

[host."https://mirror.example.com:5443"]
  capabilities = ["pull", "resolve"]
  ca = "/etc/ssl/mirror-ca.pem"
  client = [["/etc/ssl/client.pem", "/etc/ssl/client-key.pem"]]
`,
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(want) {
		t.Errorf("%d host directories, want %d (the stale one removed)", len(entries), len(want))
	}
	for host, content := range want {
		got, err := os.ReadFile(filepath.Join(dir, host, "hosts.toml"))
		if err != nil {
			t.Errorf("%s: %v", host, err)
			continue
		}
		if string(got) != content {
			t.Errorf("%s/hosts.toml:\n%s\nwant:\n%s", host, got, content)
		}
	}
	cfg := Options{DataDir: "/d", Registries: r}.Config()
	for _, line := range []string{
		`[plugins."io.containerd.grpc.v1.cri".registry]`,
		`  config_path = "/d/certs.d"`,
		`  [plugins."io.containerd.grpc.v1.cri".registry.configs."private.example.com".auth]`,
		`    username = "alice"`,
		`    password = "s3cr\"et"`,
	} {
		if !strings.Contains(cfg, line+"\n") {
			t.Errorf("containerd config lacks %q:\n%s", line, cfg)
		}
	}
	v3 := Options{DataDir: "/d", Registries: r, ConfigVersion: 3}.Config()
	for _, line := range []string{
		"version = 3",
		`[plugins."io.containerd.cri.v1.images".registry]`,
		`  [plugins."io.containerd.cri.v1.images".registry.configs."private.example.com".auth]`,
		`  [plugins."io.containerd.cri.v1.images".pinned_images]`,
		`    sandbox = "registry.k8s.io/pause:3.10"`,
		`    bin_dirs = ["/usr/lib/cni"]`,
	} {
		if !strings.Contains(v3, line+"\n") {
			t.Errorf("containerd 2 config lacks %q:\n%s", line, v3)
		}
	}
}

func TestRegistriesRejected(t *testing.T) {
	for name, content := range map[string]string{
		"rewrite":         "mirrors:\n  docker.io:\n    endpoint: [\"http://m:5000\"]\n    rewrite:\n      \"^a/(.*)\": \"b/$1\"\n",
		"unknown field":   "mirror:\n  docker.io: {}\n",
		"bad endpoint":    "mirrors:\n  docker.io:\n    endpoint: [\"ftp://m\"]\n",
		"cert but no key": "configs:\n  m:\n    tls:\n      cert_file: /c\n",
		"auth not base64": "configs:\n  m:\n    auth:\n      auth: \"%%%\"\n",
	} {
		path := filepath.Join(t.TempDir(), "registries.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadRegistries(path); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := LoadRegistries(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file that was named: accepted")
	}
}
