package containerd

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultRegistriesFile is where `mizzen server|agent` look for registry mirrors and
// credentials when --private-registry is not given (as k3s's /etc/rancher/k3s/registries.yaml);
// a missing default file means none.
const DefaultRegistriesFile = "/etc/mizzen/registries.yaml"

// Registries is k3s's registries.yaml: mirrors of registries by name ("*" for every
// registry), and the TLS settings and credentials of registry hosts, mirrors included.
type Registries struct {
	Mirrors map[string]Mirror         `json:"mirrors,omitempty"`
	Configs map[string]RegistryConfig `json:"configs,omitempty"`
}

// Mirror lists the endpoints (URLs; https:// when no scheme is given) tried in order
// before the registry itself.
type Mirror struct {
	Endpoints []string `json:"endpoint,omitempty"`
	// Rewrite is k3s's repository rewriting; containerd's hosts.toml cannot express it,
	// so a file that uses it is refused rather than half applied.
	Rewrite map[string]string `json:"rewrite,omitempty"`
}

// RegistryConfig is one registry host's settings.
type RegistryConfig struct {
	Auth *RegistryAuth `json:"auth,omitempty"`
	TLS  *RegistryTLS  `json:"tls,omitempty"`
}

// RegistryAuth are credentials: a user name and password, their base64 "user:password"
// (auth), or an identity token.
type RegistryAuth struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

// RegistryTLS are the files to verify a host with and to present to it.
type RegistryTLS struct {
	CAFile             string `json:"ca_file,omitempty"`
	CertFile           string `json:"cert_file,omitempty"`
	KeyFile            string `json:"key_file,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
}

// LoadRegistries reads a registries.yaml. When the file is the default one and does not
// exist, there are no mirrors; any other missing file is an error.
func LoadRegistries(path string) (*Registries, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && path == DefaultRegistriesFile {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--private-registry: %w", err)
	}
	var r Registries
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return nil, fmt.Errorf("--private-registry %s: %w", path, err)
	}
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("--private-registry %s: %w", path, err)
	}
	return &r, nil
}

func (r *Registries) validate() error {
	for name, m := range r.Mirrors {
		if len(m.Rewrite) > 0 {
			return fmt.Errorf("mirrors.%s.rewrite: repository rewrites are not supported (containerd's hosts.toml has none)", name)
		}
		for _, ep := range m.Endpoints {
			if _, err := endpointURL(ep); err != nil {
				return fmt.Errorf("mirrors.%s.endpoint: %w", name, err)
			}
		}
	}
	for host, c := range r.Configs {
		if c.TLS != nil && (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
			return fmt.Errorf("configs.%s.tls: cert_file and key_file go together", host)
		}
		if c.Auth != nil && c.Auth.Auth != "" {
			if _, err := base64.StdEncoding.DecodeString(c.Auth.Auth); err != nil {
				return fmt.Errorf("configs.%s.auth.auth: not base64: %w", host, err)
			}
		}
	}
	return nil
}

// endpointURL parses a mirror endpoint; one without a scheme is https, as k3s reads it.
func endpointURL(ep string) (*url.URL, error) {
	if !strings.Contains(ep, "://") {
		ep = "https://" + ep
	}
	u, err := url.Parse(ep)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q: an endpoint is http(s)://HOST[:PORT][/PATH]", ep)
	}
	return u, nil
}

// registryServer is where containerd pulls a registry's images from when no mirror
// answers: Docker Hub's API lives on registry-1.docker.io.
func registryServer(name string) string {
	if name == "docker.io" {
		return "https://registry-1.docker.io"
	}
	return "https://" + name
}

// hostsDirName is the directory containerd looks in for a registry's hosts.toml;
// "_default" holds the settings of every registry without its own ("*" in the file).
func hostsDirName(name string) string {
	if name == "*" {
		return "_default"
	}
	return name
}

// HostsFiles renders containerd's hosts.toml files (config_path), by directory name:
// one per mirrored registry, its endpoints first in order, then the registry itself;
// and one per configured host that is not mirrored, for its TLS settings.
func (r *Registries) HostsFiles() map[string]string {
	out := map[string]string{}
	if r == nil {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(r.Mirrors)) {
		var b strings.Builder
		if name != "*" {
			fmt.Fprintf(&b, "server = %s\n", toml(registryServer(name)))
		}
		for _, ep := range r.Mirrors[name].Endpoints {
			u, _ := endpointURL(ep)
			fmt.Fprintf(&b, "\n[host.%s]\n", toml(u.String()))
			b.WriteString(`  capabilities = ["pull", "resolve"]` + "\n")
			r.writeTLS(&b, u.Host)
		}
		out[hostsDirName(name)] = b.String()
	}
	for _, host := range slices.Sorted(maps.Keys(r.Configs)) {
		if _, mirrored := out[hostsDirName(host)]; mirrored || r.Configs[host].TLS == nil {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "server = %s\n\n[host.%s]\n", toml(registryServer(host)), toml(registryServer(host)))
		b.WriteString(`  capabilities = ["pull", "resolve"]` + "\n")
		r.writeTLS(&b, host)
		out[hostsDirName(host)] = b.String()
	}
	return out
}

func (r *Registries) writeTLS(b *strings.Builder, host string) {
	tls := r.Configs[host].TLS
	if tls == nil {
		return
	}
	if tls.CAFile != "" {
		fmt.Fprintf(b, "  ca = %s\n", toml(tls.CAFile))
	}
	if tls.CertFile != "" {
		fmt.Fprintf(b, "  client = [[%s, %s]]\n", toml(tls.CertFile), toml(tls.KeyFile))
	}
	if tls.InsecureSkipVerify {
		b.WriteString("  skip_verify = true\n")
	}
}

// authConfig renders the CRI plugin's per-host credentials (registry.configs.HOST.auth):
// hosts.toml carries no credentials in containerd 1.6 and 2.x, which still read these.
func (r *Registries) authConfig(section string) string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	for _, host := range slices.Sorted(maps.Keys(r.Configs)) {
		a := r.Configs[host].Auth
		if a == nil {
			continue
		}
		fmt.Fprintf(&b, "  [%s.configs.%s.auth]\n", section, toml(host))
		for _, kv := range [][2]string{{"username", a.Username}, {"password", a.Password}, {"auth", a.Auth}, {"identitytoken", a.IdentityToken}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "    %s = %s\n", kv[0], toml(kv[1]))
			}
		}
	}
	return b.String()
}

// WriteHostsDir replaces dir's content with the hosts.toml files of r.
func WriteHostsDir(dir string, r *Registries) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range r.HostsFiles() {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name, "hosts.toml"), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
