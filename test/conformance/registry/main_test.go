package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"mizzen/internal/kubelet/containerd"
)

func TestServesArchivesOverTheRegistryAPI(t *testing.T) {
	srv := serveImage(t, "registry.k8s.io/e2e-test-images/kitten:1.8")
	defer srv.Close()

	get := func(method, path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	if resp, _ := get("GET", "/v2/"); resp.StatusCode != 200 || resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
		t.Fatalf("/v2/: %d %v", resp.StatusCode, resp.Header)
	}
	resp, manifest := get("GET", "/v2/e2e-test-images/kitten/manifests/1.8?ns=registry.k8s.io")
	digest := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.oci.image.manifest.v1+json" || digest != digestOf(manifest) {
		t.Fatalf("manifest by tag: %d %v, digest of body %s", resp.StatusCode, resp.Header, digestOf(manifest))
	}
	if resp, body := get("HEAD", "/v2/e2e-test-images/kitten/manifests/"+digest); resp.StatusCode != 200 || len(body) != 0 ||
		resp.ContentLength != int64(len(manifest)) || resp.Header.Get("Docker-Content-Digest") != digest {
		t.Errorf("HEAD manifest by digest: %d length %d %v", resp.StatusCode, resp.ContentLength, resp.Header)
	}
	var m struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest %s: %v", manifest, err)
	}
	for _, d := range []string{m.Config.Digest, m.Layers[0].Digest} {
		resp, body := get("GET", "/v2/e2e-test-images/kitten/blobs/"+d)
		if resp.StatusCode != 200 || digestOf(body) != d || resp.Header.Get("Docker-Content-Digest") != d {
			t.Errorf("blob %s: %d, body digest %s", d, resp.StatusCode, digestOf(body))
		}
	}
	for path, code := range map[string]string{
		"/v2/e2e-test-images/kitten/manifests/9.9": "MANIFEST_UNKNOWN",
		"/v2/e2e-test-images/kitten/blobs/sha256:0000000000000000000000000000000000000000000000000000000000000000": "BLOB_UNKNOWN",
		"/v2/e2e-test-images/kitten/manifests/" + m.Layers[0].Digest:                                               "MANIFEST_UNKNOWN",
	} {
		resp, body := get("GET", path)
		var e struct{ Errors []struct{ Code string } }
		if resp.StatusCode != 404 || json.Unmarshal(body, &e) != nil || len(e.Errors) != 1 || e.Errors[0].Code != code {
			t.Errorf("%s: %d %s, want 404 %s", path, resp.StatusCode, body, code)
		}
	}
	if resp, _ := get("DELETE", "/v2/e2e-test-images/kitten/manifests/1.8"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
}

// serveImage serves, through a registry of its own, one image of that name holding a
// data.json.
func serveImage(t *testing.T, name string) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "Kitten.tar"))
	if err != nil {
		t.Fatal(err)
	}
	img := containerd.Image{Name: name, Files: []containerd.File{{Path: "/data.json", Mode: 0o644, Data: []byte(`{"image":"kitten.jpg"}`)}}}
	err = containerd.WriteOCIArchive(f, img)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
	reg, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return httptest.NewServer(reg)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
