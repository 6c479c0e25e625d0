// Command registry serves OCI image archives (as ./test/conformance/images writes them)
// over the Docker Registry HTTP API v2, read only, so that a cluster whose images were
// imported can also pull them: the conformance suite's pods with imagePullPolicy Always.
// The agent's containerd reaches it as a mirror of the images' registries
// (mizzen server --private-registry), which adds ?ns=REGISTRY to each request; names
// are looked up under that registry first, then under any.
//
//	go run ./test/conformance/registry -dir DIR -listen 127.0.0.1:0 -address-file FILE
//
// It serves /v2/, manifests by tag and by digest and blobs by digest (GET and HEAD),
// with the Content-Type, Content-Length and Docker-Content-Digest a client checks, and
// the API's JSON errors for what it does not have. Blobs are read from the archives in
// place, not held in memory.
package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory of OCI archives (*.tar)")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	addressFile := flag.String("address-file", "", "file to write the address listened on to, once serving")
	flag.Parse()
	reg, err := load(*dir)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	log.Printf("registry: %d images from %s on %s", len(reg.tags), *dir, l.Addr())
	if *addressFile != "" {
		if err := os.WriteFile(*addressFile, []byte(l.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatalf("registry: %v", err)
		}
	}
	log.Fatal(http.Serve(l, reg))
}

// blob is content in an archive: size bytes at offset of file.
type blob struct {
	file   string
	offset int64
	size   int64
}

// registry is every image of the archives: manifests by "REGISTRY/REPO:TAG" and blobs
// (manifests included) by digest.
type registry struct {
	tags  map[string]string // image name -> manifest digest
	blobs map[string]blob
	// mediaTypes of manifests, by digest.
	mediaTypes map[string]string
}

func load(dir string) (*registry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no archives (*.tar) in %q", dir)
	}
	r := &registry{tags: map[string]string{}, blobs: map[string]blob{}, mediaTypes: map[string]string{}}
	for _, f := range files {
		if err := r.add(f); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return r, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// add indexes one OCI archive: where each blob's bytes are, and its index's names.
func (r *registry) add(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var index []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			if index, err = io.ReadAll(tr); err != nil {
				return err
			}
		case strings.HasPrefix(name, "blobs/") && h.Typeflag == tar.TypeReg:
			// tar.Reader seeks past entries it skips, so the file's position is
			// where this entry's bytes begin.
			off, err := f.Seek(0, io.SeekCurrent)
			if err != nil {
				return err
			}
			alg, hex, _ := strings.Cut(strings.TrimPrefix(name, "blobs/"), "/")
			r.blobs[alg+":"+hex] = blob{file: path, offset: off, size: h.Size}
		}
	}
	var idx struct {
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(index, &idx); err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	for _, m := range idx.Manifests {
		if _, ok := r.blobs[m.Digest]; !ok {
			return fmt.Errorf("index.json names %s, which the archive lacks", m.Digest)
		}
		r.mediaTypes[m.Digest] = m.MediaType
		if name := m.Annotations["io.containerd.image.name"]; name != "" {
			r.tags[name] = m.Digest
		}
	}
	return nil
}

// ServeHTTP answers the read-only part of the registry API.
func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	log.Printf("%s %s", req.Method, req.URL.RequestURI())
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		apiError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read only")
		return
	}
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	if path == "" || req.URL.Path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
		return
	}
	if path == req.URL.Path {
		http.NotFound(w, req)
		return
	}
	if name, ref, ok := cutLast(path, "/manifests/"); ok {
		r.manifest(w, req, name, ref)
		return
	}
	if _, digest, ok := cutLast(path, "/blobs/"); ok {
		b, found := r.blobs[digest]
		if !found {
			apiError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
			return
		}
		r.serve(w, req, digest, "application/octet-stream", b)
		return
	}
	apiError(w, http.StatusNotFound, "UNSUPPORTED", "not served by this registry")
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// manifest serves a manifest by digest, or by tag: the image REGISTRY/NAME:TAG with the
// registry from ?ns= (what containerd asks a mirror), else any registry's.
func (r *registry) manifest(w http.ResponseWriter, req *http.Request, name, ref string) {
	digest := ref
	if !strings.Contains(ref, ":") {
		digest = r.lookup(req.URL.Query().Get("ns"), name, ref)
	}
	b, ok := r.blobs[digest]
	mediaType, isManifest := r.mediaTypes[digest]
	if digest == "" || !ok || !isManifest {
		apiError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", fmt.Sprintf("manifest unknown: %s:%s", name, ref))
		return
	}
	r.serve(w, req, digest, mediaType, b)
}

func (r *registry) lookup(ns, name, tag string) string {
	if ns != "" {
		if d, ok := r.tags[ns+"/"+name+":"+tag]; ok {
			return d
		}
	}
	for image, d := range r.tags {
		if strings.HasSuffix(image, "/"+name+":"+tag) {
			return d
		}
	}
	return ""
}

func (r *registry) serve(w http.ResponseWriter, req *http.Request, digest, contentType string, b blob) {
	f, err := os.Open(b.file)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	defer f.Close()
	w.Header().Set("Docker-Content-Digest", digest)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Etag", `"`+digest+`"`)
	// ServeContent answers HEAD and ranges, with the length.
	http.ServeContent(w, req, "", zeroTime, io.NewSectionReader(f, b.offset, b.size))
}

// apiError writes the registry API's error body.
func apiError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": message}}})
}

var zeroTime time.Time
