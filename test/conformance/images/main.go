// Command images writes the container images upstream's conformance suite runs, under
// the exact names e2e.test asks for, as OCI archives the agent imports from
// DATA_DIR/agent/images (no registry is reachable): agnhost built from upstream's
// source (also as /agnhost-2, as its image has it), Debian's busybox-static as busybox,
// mizzen's pause as pause, and agnhost's netexec on port 80 standing in for nginx. The
// agnhost image's curl is a shim over busybox's wget, enough for `curl URL`, its bash a
// shim over busybox's ash, enough for `bash -c '...'`, and its nc
// is ./test/conformance/netcat (netcat-openbsd's flags, which busybox's nc lacks); its dig
// and getent are ./test/conformance/dnsutils, which also makes up the glibc-dns-testing
// image (as agnhost's files: a stand-in, with Go's resolver rather than glibc's). Debian's
// busybox sh runs its own applets before searching PATH (FEATURE_SH_STANDALONE), so the
// agnhost image's busybox has its nc applet renamed away (withoutApplet) and no /bin/nc:
// `sh -c 'nc ...'` then finds /usr/bin/nc, as in upstream's Alpine-based image. The
// busybox image's /bin/sh is ./test/conformance/sh (ash, but `sh -c env` keeps variables
// whose names are not shell identifiers, as upstream's busybox does), and nonewprivs is
// upstream's nnp (built from test/images/nonewprivs, setuid root) over busybox. The
// aggregator spec's sample-apiserver is k8s.io/sample-apiserver built from the module
// proxy (as /sample-apiserver, its entrypoint, as upstream's image has it) and its etcd
// is go.etcd.io/etcd's server as /usr/local/bin/etcd; both over busybox.
//
//	go run ./test/conformance/images -list images.txt -agnhost bin/agnhost -netcat bin/nc -dnsutils bin/dig -sh bin/sh -nnp bin/nnp -pause bin/mizzen-pause -sample-apiserver bin/sample-apiserver -etcd bin/etcd -out DIR
//
// images.txt holds lines "<image-id> <registry> <name> <version>" (the table of
// test/utils/image/manifest.go); ids other than Agnhost, AgnhostPrev, BusyBox, Pause,
// Nginx, NginxNew, GlibcDnsTesting, Nonewprivs, NonRoot, APIServer and Etcd are not built, and specs needing them
// fail for that reason.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"mizzen/internal/kubelet/containerd"
)

// curlShim stands in for the curl upstream's agnhost image carries, for the plain
// `curl URL` the suite's hooks run: busybox's wget fetches the URL to stdout.
const curlShim = "#!/bin/sh\n# stand-in for curl: busybox wget; flags are ignored\nfor a in \"$@\"; do case \"$a\" in -*) ;; *) url=$a ;; esac; done\nexec wget -q -O - \"$url\"\n"

// bashShim stands in for the bash upstream's agnhost image installs (Alpine's bash),
// which specs run as `/bin/bash -c '...'`: busybox's ash runs the command instead.
const bashShim = "#!/bin/sh\n# stand-in for bash: busybox ash\nexec /bin/sh \"$@\"\n"

// standInOSRelease is the /etc/os-release of the images that upstream bases on
// agnhost's Alpine Linux image (kitten, nautilus; the ImageVolume spec reads it): it
// names what they stand in for and says they are not it.
const standInOSRelease = `NAME="mizzen conformance stand-in for an Alpine Linux based image"
ID=mizzen-conformance-stand-in
ID_LIKE=alpine
PRETTY_NAME="mizzen conformance stand-in (upstream's image is Alpine Linux based; this one is busybox and agnhost)"
`

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func main() {
	list := flag.String("list", "", "image table: lines \"<id> <registry> <name> <version>\"")
	agnhost := flag.String("agnhost", "", "agnhost binary built from upstream's source")
	netcat := flag.String("netcat", "", "netcat stand-in (./test/conformance/netcat, static), installed as /usr/bin/nc")
	dnsutils := flag.String("dnsutils", "", "dig and getent stand-in (./test/conformance/dnsutils, static), installed as /usr/bin/dig and /usr/bin/getent")
	shell := flag.String("sh", "", "the busybox image's /bin/sh (./test/conformance/sh, static)")
	nnp := flag.String("nnp", "", "upstream's test/images/nonewprivs program (static), installed setuid root as /usr/local/bin/nnp")
	pause := flag.String("pause", "", "mizzen's pause program")
	sampleAPIServer := flag.String("sample-apiserver", "", "k8s.io/sample-apiserver (static), the APIServer image's /sample-apiserver")
	etcd := flag.String("etcd", "", "go.etcd.io/etcd's server (static), the Etcd image's /usr/local/bin/etcd")
	busybox := flag.String("busybox", "/bin/busybox", "statically linked busybox (Debian's busybox-static)")
	agnhostSrc := flag.String("agnhost-src", "", "upstream's test/images/agnhost directory, for the files its image carries (porter's localhost.crt and .key)")
	out := flag.String("out", "", "directory to write <id>.tar archives to")
	flag.Parse()
	extra := map[string]string{"sample-apiserver": *sampleAPIServer, "etcd": *etcd}
	if err := run(*list, *agnhost, *netcat, *dnsutils, *shell, *nnp, *agnhostSrc, *pause, *busybox, *out, extra); err != nil {
		fmt.Fprintln(os.Stderr, "conformance images:", err)
		os.Exit(1)
	}
}

// extra names optional programs by role ("sample-apiserver", "etcd"); an empty or
// missing path leaves that image out.
func run(list, agnhostPath, netcatPath, dnsutilsPath, shellPath, nnpPath, agnhostSrc, pausePath, busyboxPath, out string, extra map[string]string) error {
	agnhost, err := os.ReadFile(agnhostPath)
	if err != nil {
		return err
	}
	pause, err := os.ReadFile(pausePath)
	if err != nil {
		return err
	}
	bb, err := busyboxFiles(busyboxPath, nil)
	if err != nil {
		return err
	}
	// agnhost's own nc is the stand-in; its busybox must not answer to "nc".
	bbNoNC, err := busyboxFiles(busyboxPath, []string{"nc"})
	if err != nil {
		return err
	}
	netcat, err := os.ReadFile(netcatPath)
	if err != nil {
		return err
	}
	dnsutils, err := os.ReadFile(dnsutilsPath)
	if err != nil {
		return err
	}
	withAgnhost := append([]containerd.File{{Path: "/usr/bin/dig", Mode: 0o755, Data: dnsutils}, {Path: "/usr/bin/getent", Link: "/usr/bin/dig"}, {Path: "/agnhost", Mode: 0o755, Data: agnhost}, {Path: "/agnhost-2", Link: "/agnhost"},
		{Path: "/usr/bin/curl", Mode: 0o755, Data: []byte(curlShim)}, {Path: "/usr/bin/nc", Mode: 0o755, Data: netcat},
		{Path: "/bin/bash", Mode: 0o755, Data: []byte(bashShim)}}, bbNoNC...)
	// The busybox image: busybox, with the harness's sh in front of ash.
	busyboxImage := bb
	if shellPath != "" {
		shell, err := os.ReadFile(shellPath)
		if err != nil {
			return err
		}
		busyboxImage = []containerd.File{{Path: "/bin/sh", Mode: 0o755, Data: shell}}
		for _, f := range bb {
			if f.Path != "/bin/sh" {
				busyboxImage = append(busyboxImage, f)
			}
		}
	}
	var nnp []byte
	if nnpPath != "" {
		if nnp, err = os.ReadFile(nnpPath); err != nil {
			return err
		}
	}
	programs := map[string][]byte{}
	for role, path := range extra {
		if path == "" {
			continue
		}
		if programs[role], err = os.ReadFile(path); err != nil {
			return err
		}
	}
	if agnhostSrc != "" {
		// porter serves TLS with these, as upstream's image ships them.
		for _, name := range []string{"localhost.crt", "localhost.key"} {
			data, err := os.ReadFile(filepath.Join(agnhostSrc, "porter", name))
			if err != nil {
				return err
			}
			withAgnhost = append(withAgnhost, containerd.File{Path: "/" + name, Mode: 0o644, Data: data})
		}
	}
	f, err := os.Open(list)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		id, ref := fields[0], fields[1]+"/"+fields[2]+":"+fields[3]
		img := containerd.Image{Name: ref, Env: []string{defaultPath}}
		switch id {
		case "Agnhost", "AgnhostPrev":
			img.Files, img.Entrypoint, img.Cmd = withAgnhost, []string{"/agnhost"}, []string{"pause"}
		case "GlibcDnsTesting":
			// A stand-in: the same dig and getent as agnhost's, not glibc's resolver.
			img.Files = withAgnhost
		case "BusyBox":
			img.Files, img.Cmd = busyboxImage, []string{"sh"}
		case "Nonewprivs":
			if nnp == nil {
				continue
			}
			// As upstream's Dockerfile: COPY nnp /usr/local/bin/nnp; chmod +s.
			img.Files, img.Cmd = append([]containerd.File{{Path: "/usr/local/bin/nnp", Mode: 0o4755, Data: nnp}}, bb...), []string{"nnp"}
		case "NonRoot":
			// As upstream's image: busybox whose default user is 1234 (USER 1234).
			img.Files, img.Cmd, img.User = busyboxImage, []string{"sh"}, "1234"
		case "APIServer":
			// As upstream's image: ADD sample-apiserver /sample-apiserver, over a small base.
			if programs["sample-apiserver"] == nil {
				continue
			}
			img.Files, img.Entrypoint = append([]containerd.File{{Path: "/sample-apiserver", Mode: 0o755, Data: programs["sample-apiserver"]}}, bb...), []string{"/sample-apiserver"}
		case "Etcd":
			// The spec runs /usr/local/bin/etcd with its own flags.
			if programs["etcd"] == nil {
				continue
			}
			img.Files, img.Cmd = append([]containerd.File{{Path: "/usr/local/bin/etcd", Mode: 0o755, Data: programs["etcd"]}}, bb...), []string{"/usr/local/bin/etcd"}
		case "Pause":
			img.Files, img.Entrypoint = []containerd.File{{Path: "/pause", Mode: 0o755, Data: pause}}, []string{"/pause"}
		case "Nginx", "NginxNew":
			// A stand-in: serves HTTP on 80 as nginx does, but is not nginx.
			img.Files, img.Entrypoint, img.Cmd = withAgnhost, []string{"/agnhost"}, []string{"netexec", "--http-port=80"}
		case "Nautilus", "Kitten":
			// As upstream builds them: agnhost's test-webserver serving the image's
			// html directory (data.json and a picture) from / on port 80.
			if agnhostSrc == "" {
				continue
			}
			html, err := htmlFiles(filepath.Join(filepath.Dir(agnhostSrc), fields[2], "html"))
			if err != nil {
				return err
			}
			files := append(append([]containerd.File(nil), withAgnhost...), html...)
			files = append(files, containerd.File{Path: "/etc/os-release", Mode: 0o644, Data: []byte(standInOSRelease)})
			img.Files, img.Entrypoint, img.Cmd = files, []string{"/agnhost"}, []string{"test-webserver"}
		default:
			continue
		}
		if err := write(filepath.Join(out, id+".tar"), img); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		fmt.Printf("%s -> %s\n", ref, filepath.Join(out, id+".tar"))
	}
	return sc.Err()
}

// busyboxFiles is busybox with each of its applets as a link in /bin, less the
// applets named in drop (renamed away in the binary, with no link).
func busyboxFiles(path string, drop []string) ([]containerd.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", path, err)
	}
	applets := strings.Fields(string(out))
	for _, name := range drop {
		if data, err = withoutApplet(data, applets, name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	files := []containerd.File{{Path: "/bin/busybox", Mode: 0o755, Data: data}, {Path: "/tmp", Dir: true, Mode: 0o1777}}
	for _, a := range applets {
		if a != "busybox" && !slices.Contains(drop, a) {
			files = append(files, containerd.File{Path: "/bin/" + a, Link: "/bin/busybox"})
		}
	}
	return files, nil
}

// withoutApplet renames applet name in busybox's table of applet names (NUL-separated,
// sorted, as `busybox --list` prints it) to a name of the same length that is no applet
// and keeps the table sorted, so busybox, and its sh, no longer know the applet while
// every other lookup and offset stays as it was.
func withoutApplet(binary []byte, applets []string, name string) ([]byte, error) {
	i := slices.Index(applets, name)
	if i <= 0 || i == len(applets)-1 {
		return nil, fmt.Errorf("applet %q is not inside the applet list", name)
	}
	prev, next := applets[i-1], applets[i+1]
	table := []byte("\x00" + prev + "\x00" + name + "\x00" + next + "\x00")
	if n := bytes.Count(binary, table); n != 1 {
		return nil, fmt.Errorf("the applet name table around %q is found %d times, not once", name, n)
	}
	for c := name[len(name)-1] + 1; c < 0x7f; c++ {
		renamed := name[:len(name)-1] + string(c)
		if renamed <= prev || renamed >= next || slices.Contains(applets, renamed) {
			continue
		}
		return bytes.Replace(binary, table, []byte("\x00"+prev+"\x00"+renamed+"\x00"+next+"\x00"), 1), nil
	}
	return nil, fmt.Errorf("no name to rename applet %q to between %q and %q", name, prev, next)
}

// write writes the archive beside its final name and renames it.
func write(path string, img containerd.Image) error {
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
	return os.Rename(f.Name(), path)
}

// htmlFiles is every file of dir, placed in the image's root directory.
func htmlFiles(dir string) ([]containerd.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []containerd.File
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files = append(files, containerd.File{Path: "/" + e.Name(), Mode: 0o644, Data: data})
	}
	return files, nil
}
