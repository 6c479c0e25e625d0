package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dockerConfigEntry is one registry's credentials in a .dockerconfigjson or .dockercfg.
type dockerConfigEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"` // base64 of username:password, when the two are absent
}

// registryCredential is one registry key of a pull secret and its credentials.
type registryCredential struct {
	key  string // as written in the secret: a host, host/path, URL, or *.host glob
	auth *runtimeapi.AuthConfig
}

// pullCredentials returns the credentials of the pod's imagePullSecrets that apply to
// image, the most specific registry key first, as upstream's keyring orders them. A
// secret that cannot be read is reported in an event and skipped, as upstream does: the
// pull may still succeed without it.
func (kl *Kubelet) pullCredentials(ctx context.Context, pod *v1.Pod, image string) []*runtimeapi.AuthConfig {
	var creds []registryCredential
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		secret, err := kl.volumeSources.Secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			missing = append(missing, ref.Name)
			continue
		}
		creds = append(creds, parsePullSecret(secret)...)
	}
	if len(missing) > 0 {
		kl.recorder.Eventf(containerRef(pod, ""), v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	return matchCredentials(creds, image)
}

// parsePullSecret reads the registry credentials of a kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg secret; other secrets hold none.
func parsePullSecret(secret *v1.Secret) []registryCredential {
	var entries map[string]dockerConfigEntry
	switch secret.Type {
	case v1.SecretTypeDockerConfigJson:
		var cfg struct {
			Auths map[string]dockerConfigEntry `json:"auths"`
		}
		if json.Unmarshal(secret.Data[v1.DockerConfigJsonKey], &cfg) != nil {
			return nil
		}
		entries = cfg.Auths
	case v1.SecretTypeDockercfg:
		if json.Unmarshal(secret.Data[v1.DockerConfigKey], &entries) != nil {
			return nil
		}
	}
	var out []registryCredential
	for key, e := range entries {
		user, pass := e.Username, e.Password
		if user == "" && pass == "" && e.Auth != "" {
			if raw, err := base64.StdEncoding.DecodeString(e.Auth); err == nil {
				user, pass, _ = strings.Cut(string(raw), ":")
			}
		}
		out = append(out, registryCredential{key: key, auth: &runtimeapi.AuthConfig{Username: user, Password: pass}})
	}
	return out
}

// matchCredentials keeps the credentials whose key covers image, longest key first.
func matchCredentials(creds []registryCredential, image string) []*runtimeapi.AuthConfig {
	host, repo := splitImage(image)
	var matched []registryCredential
	for _, c := range creds {
		if keyMatches(c.key, host, repo) {
			matched = append(matched, c)
		}
	}
	sort.SliceStable(matched, func(i, j int) bool { return len(matched[i].key) > len(matched[j].key) })
	out := make([]*runtimeapi.AuthConfig, len(matched))
	for i, c := range matched {
		out[i] = c.auth
	}
	return out
}

// dockerHubHosts are the names Docker Hub credentials are written under.
var dockerHubHosts = map[string]bool{"docker.io": true, "index.docker.io": true, "registry-1.docker.io": true}

// splitImage returns an image reference's registry host (docker.io when it names none)
// and its repository path without tag or digest.
func splitImage(image string) (host, repo string) {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	first, rest, hasSlash := strings.Cut(image, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !hasSlash {
			return "docker.io", "library/" + image
		}
		return "docker.io", image
	}
	return first, rest
}

// keyMatches reports whether a registry key (host[:port][/path], optionally a URL, the
// host's labels possibly "*" globs) covers an image on host with repository repo.
func keyMatches(key, host, repo string) bool {
	if strings.Contains(key, "://") {
		u, err := url.Parse(key)
		if err != nil {
			return false
		}
		key = u.Host + u.Path
	}
	key = strings.TrimSuffix(key, "/")
	keyHost, keyPath, _ := strings.Cut(key, "/")
	if dockerHubHosts[keyHost] && dockerHubHosts[host] {
		keyHost = host
		if keyPath == "v1" || keyPath == "v2" {
			keyPath = "" // https://index.docker.io/v1/ covers all of Docker Hub
		}
	}
	if !hostMatches(keyHost, host) {
		return false
	}
	return keyPath == "" || repo == keyPath || strings.HasPrefix(repo, keyPath+"/")
}

// hostMatches compares host[:port] names label by label, a key label may be a glob.
func hostMatches(pattern, host string) bool {
	pHost, pPort, _ := strings.Cut(pattern, ":")
	hHost, hPort, _ := strings.Cut(host, ":")
	if pPort != hPort {
		return false
	}
	pl, hl := strings.Split(pHost, "."), strings.Split(hHost, ".")
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, err := path.Match(pl[i], hl[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// pullImage pulls with each matching credential in turn, then returns the first success
// or every failure; with no credentials it pulls anonymously.
func (kl *Kubelet) pullImage(ctx context.Context, pod *v1.Pod, spec *runtimeapi.ImageSpec, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	auths := kl.pullCredentials(ctx, pod, spec.Image)
	if len(auths) == 0 {
		return kl.images.PullImage(ctx, spec, nil, sbCfg)
	}
	var errs []string
	for _, auth := range auths {
		ref, err := kl.images.PullImage(ctx, spec, auth, sbCfg)
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("%s", strings.Join(errs, "; "))
}
