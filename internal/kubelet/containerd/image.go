package containerd

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// OCI media types of the archive.
const (
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// File is one entry of a single-layer image: a regular file with Data, a symbolic link
// when Link is set, or a directory when Dir is set.
type File struct {
	Path string // absolute inside the image, e.g. "/pause"
	Mode int64
	Data []byte
	Link string // target of a symbolic link
	Dir  bool
}

// Image describes a single-layer image to package.
type Image struct {
	Name       string // full reference, e.g. registry.k8s.io/pause:3.10
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=value
	User       string   // the user processes run as, "uid[:gid]" or a name; "" is root
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// layerTar is the uncompressed layer: the files, with their parent directories.
func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(f.Path, "/")
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			d := strings.Join(parts[:i], "/") + "/"
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
					return nil, err
				}
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: epoch}
		switch {
		case f.Dir:
			if dirs[rel+"/"] {
				return nil, fmt.Errorf("image layer: directory %s comes after its contents", f.Path)
			}
			dirs[rel+"/"] = true
			hdr = &tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: f.Mode, ModTime: epoch}
		case f.Link != "":
			hdr = &tar.Header{Typeflag: tar.TypeSymlink, Name: rel, Linkname: f.Link, Mode: 0o777, ModTime: epoch}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteOCIArchive writes img as an OCI image layout in a tar stream, the format
// `ctr images import` reads. The index names the image with the annotations containerd
// and the OCI spec use, so the import needs no extra flags.
func WriteOCIArchive(w io.Writer, img Image) error {
	layer, err := layerTar(img.Files)
	if err != nil {
		return err
	}
	layerDigest := digestOf(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       imageConfig(img),
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaTypeManifest,
		"config":        descriptor{MediaType: mediaTypeConfig, Digest: digestOf(config), Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: mediaTypeLayer, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return err
	}
	tag := img.Name[strings.LastIndex(img.Name, ":")+1:]
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []descriptor{{
			MediaType: mediaTypeManifest, Digest: digestOf(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{
				"io.containerd.image.name":          img.Name,
				"org.opencontainers.image.ref.name": tag,
			},
			Platform: &platform{Architecture: runtime.GOARCH, OS: "linux"},
		}},
	})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(digestOf(config), "sha256:"), config},
		{"blobs/sha256/" + strings.TrimPrefix(digestOf(manifest), "sha256:"), manifest},
		{"blobs/sha256/" + strings.TrimPrefix(layerDigest, "sha256:"), layer},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// imageConfig is the runtime part of the image configuration; empty fields are left out.
func imageConfig(img Image) map[string]any {
	c := map[string]any{}
	if len(img.Entrypoint) > 0 {
		c["Entrypoint"] = img.Entrypoint
	}
	if len(img.Cmd) > 0 {
		c["Cmd"] = img.Cmd
	}
	if len(img.Env) > 0 {
		c["Env"] = img.Env
	}
	if img.User != "" {
		c["User"] = img.User
	}
	return c
}

// PauseImage is the sandbox image around a statically linked pause binary.
func PauseImage(name string, pauseBinary []byte) Image {
	return Image{Name: name, Files: []File{{Path: "/pause", Mode: 0o755, Data: pauseBinary}}, Entrypoint: []string{"/pause"}}
}

// ImportImage imports an OCI archive into containerd's k8s.io namespace, where the CRI
// plugin sees images, with ctr (CRI itself has no import).
func ImportImage(ctx context.Context, opts Options, img Image) error {
	opts.setDefaults()
	f, err := os.CreateTemp(opts.DataDir, "image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := WriteOCIArchive(f, img); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := ImportArchive(ctx, opts, f.Name()); err != nil {
		return fmt.Errorf("importing %s: %w", img.Name, err)
	}
	return nil
}

// ImportArchive imports an image tarball (an OCI image layout or a docker-archive, as
// `docker save` writes) into containerd's k8s.io namespace with ctr. opts.Socket() is
// the containerd socket unless opts.Address is set.
func ImportArchive(ctx context.Context, opts Options, path string) error {
	opts.setDefaults()
	address := opts.Address
	if address == "" {
		address = opts.Socket()
	}
	out, err := exec.CommandContext(ctx, opts.CtrPath, "--address", address, "-n", "k8s.io",
		"images", "import", "--snapshotter", opts.Snapshotter, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return nil
}

// ImportArchivesIn imports every *.tar file in dir (none when dir does not exist), as
// k3s does for air-gapped images, and returns the files it imported.
func ImportArchivesIn(ctx context.Context, opts Options, dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var imported []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tar") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := ImportArchive(ctx, opts, path); err != nil {
			return imported, err
		}
		imported = append(imported, path)
	}
	return imported, nil
}
