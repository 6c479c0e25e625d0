// Command build packages the project's test images into OCI archives that
// `mizzen image import` (or the agent, from DATA_DIR/agent/images) loads into
// containerd, since no registry is reachable: mizzen.local/agnhost:v1 (the static
// agnhost program, with busybox for a shell) and mizzen.local/busybox:v1 (Debian's
// busybox-static with its applets as symbolic links).
//
//	go run ./test/images/build -out _output/images
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"mizzen/internal/kubelet/containerd"
)

// Image names the tests and users refer to.
const (
	AgnhostImage = "mizzen.local/agnhost:v1"
	BusyboxImage = "mizzen.local/busybox:v1"
)

// defaultPath is the PATH of both images, as upstream's busybox image sets it.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func main() {
	out := flag.String("out", "_output/images", "directory to write agnhost.tar and busybox.tar to")
	busybox := flag.String("busybox", "/bin/busybox", "statically linked busybox (Debian's busybox-static)")
	flag.Parse()
	if err := run(context.Background(), *out, *busybox); err != nil {
		fmt.Fprintln(os.Stderr, "build images:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, busyboxPath string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	busybox, err := busyboxFiles(ctx, busyboxPath)
	if err != nil {
		return err
	}
	agnhost, err := buildAgnhost(ctx)
	if err != nil {
		return err
	}
	images := map[string]containerd.Image{
		"busybox.tar": {
			Name: BusyboxImage, Files: busybox, Cmd: []string{"sh"}, Env: []string{defaultPath},
		},
		"agnhost.tar": {
			Name:       AgnhostImage,
			Files:      append([]containerd.File{{Path: "/agnhost", Mode: 0o755, Data: agnhost}}, busybox...),
			Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: []string{defaultPath},
		},
	}
	for file, img := range images {
		if err := writeArchive(filepath.Join(out, file), img); err != nil {
			return err
		}
		fmt.Printf("%s -> %s\n", img.Name, filepath.Join(out, file))
	}
	return nil
}

// writeArchive writes the archive beside its final name and renames it, so a reader
// never sees half an archive.
func writeArchive(path string, img containerd.Image) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := containerd.WriteOCIArchive(f, img); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// buildAgnhost compiles ./test/images/agnhost statically and returns the binary.
func buildAgnhost(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "agnhost-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "agnhost")
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-s -w", "-o", bin, "mizzen/test/images/agnhost")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build agnhost: %w\n%s", err, out)
	}
	return os.ReadFile(bin)
}

// busyboxFiles is busybox at /bin/busybox with a symbolic link per applet, where
// `busybox --list-full` says each lives, plus /tmp and the account files a shell expects.
func busyboxFiles(ctx context.Context, path string) ([]containerd.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w (install Debian's busybox-static: make deps)", err)
	}
	list, err := exec.CommandContext(ctx, path, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", path, err)
	}
	files := []containerd.File{
		{Path: "/bin/busybox", Mode: 0o755, Data: data},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "bin/busybox" {
			continue
		}
		files = append(files, containerd.File{Path: "/" + applet, Link: "/bin/busybox"})
	}
	return files, nil
}
