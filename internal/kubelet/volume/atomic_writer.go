package volume

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// file is one file of an API-data volume: its content, permission bits and, for
// service account tokens, the user that owns it (-1 or unset: root).
type file struct {
	data  []byte
	mode  os.FileMode
	owner *int64
}

// payload maps a relative path inside the volume to its file.
type payload map[string]file

const dataDirName = "..data"

// validatePath refuses what could escape the volume or clash with the writer's own
// entries: absolute paths, "..", and elements starting with "..".
func validatePath(p string) error {
	if p == "" {
		return fmt.Errorf("invalid path: must not be empty")
	}
	if filepath.IsAbs(p) {
		return fmt.Errorf("invalid path %q: must be relative", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
	}
	if strings.HasPrefix(p, "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}

// atomicWriter writes API-data volumes with writeAtomic, and remembers for each
// volume directory the payload it last wrote or found there (a digest) and the "..data"
// directory that holds it. A sync whose payload is unchanged then costs one readlink,
// where comparing the disk walks the volume and reads every file: on every sync of
// every pod, the hollow nodes' largest cost (BENCHMARKS.md, dens18).
//
// What a reader of the volume sees does not change: the payload is the same, and any
// other payload is written as before. What is given up is repairing, while the payload
// stays the same, a file changed behind the kubelet's back inside the current "..data"
// directory (upstream's AtomicWriter reads every file on every sync and would rewrite
// it): containers mount these volumes read-only, so only the node's root can do that,
// and a restarted kubelet, remembering nothing, compares the disk again and repairs
// it. A "..data" link that no longer points where this writer left it (removed,
// swapped) also falls back to comparing the disk.
type atomicWriter struct {
	mu      sync.Mutex
	written map[string]writtenPayload // by volume directory
}

// writtenPayload is what a volume directory was last known to hold.
type writtenPayload struct {
	dataDir string // the "..data" link's target
	digest  [sha256.Size]byte
}

// write brings dir to the payload as writeAtomic does, skipping the comparison of the
// disk when dir still holds what this writer last left there. It reports whether
// anything changed.
func (w *atomicWriter) write(dir string, p payload, gid int64) (bool, error) {
	digest := p.digest(gid)
	w.mu.Lock()
	last, known := w.written[dir]
	w.mu.Unlock()
	if known && last.digest == digest {
		if target, err := os.Readlink(filepath.Join(dir, dataDirName)); err == nil && target == last.dataDir {
			return false, nil
		}
	}
	changed, dataDir, err := writeAtomic(dir, p, gid)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		delete(w.written, dir)
		return false, err
	}
	if w.written == nil {
		w.written = map[string]writtenPayload{}
	}
	w.written[dir] = writtenPayload{dataDir: dataDir, digest: digest}
	return changed, nil
}

// forget drops what the writer remembers of the volumes under podDir (a pod's
// volumes torn down).
func (w *atomicWriter) forget(podDir string) {
	prefix := podDir + string(filepath.Separator)
	w.mu.Lock()
	defer w.mu.Unlock()
	for dir := range w.written {
		if strings.HasPrefix(dir, prefix) {
			delete(w.written, dir)
		}
	}
}

// digest identifies the payload as written with gid: every path, its bytes, mode and
// owner.
func (p payload) digest(gid int64) [sha256.Size]byte {
	h := sha256.New()
	var buf [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	num(uint64(gid))
	for _, path := range slices.Sorted(maps.Keys(p)) {
		f := p[path]
		num(uint64(len(path)))
		h.Write([]byte(path))
		num(uint64(f.mode))
		if f.owner != nil {
			num(1)
			num(uint64(*f.owner))
		} else {
			num(0)
		}
		num(uint64(len(f.data)))
		h.Write(f.data)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// writeAtomic makes dir show exactly the payload, so that a reader never sees a mix of
// two versions: the files go into a fresh timestamped directory, the "..data" symlink is
// swapped to it with one rename, and each user-visible top-level name is a symlink into
// "..data". gid, when not negative, owns the files (fsGroup), and a file's owner, when
// set, is its user. It reports whether anything changed, and the directory "..data"
// now points to.
func writeAtomic(dir string, p payload, gid int64) (bool, string, error) {
	for path := range p {
		if err := validatePath(path); err != nil {
			return false, "", err
		}
	}
	fresh, err := makeDir(dir)
	if err != nil {
		return false, "", err
	}
	// A directory made just now holds nothing: no "..data" to read, no temporary
	// link or stale names to remove. Skipping those calls matters where pods come and
	// go by the thousand (the hollow nodes write one token volume per pod).
	var oldTS string
	if !fresh {
		oldTS, err = os.Readlink(filepath.Join(dir, dataDirName))
		if err != nil && !os.IsNotExist(err) {
			return false, "", err
		}
	}
	if oldTS != "" {
		same, err := sameContent(filepath.Join(dir, oldTS), p)
		if err != nil {
			return false, "", err
		}
		if same {
			return false, oldTS, nil
		}
	}

	tsDir, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, "", err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		return false, "", err
	}
	for path, f := range p {
		full := filepath.Join(tsDir, path)
		if strings.Contains(path, "/") {
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return false, "", err
			}
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return false, "", err
		}
		if err := os.Chmod(full, f.mode); err != nil {
			return false, "", err
		}
		uid := -1
		if f.owner != nil {
			uid = int(*f.owner)
		}
		if gid >= 0 || uid >= 0 {
			if err := os.Lchown(full, uid, int(gid)); err != nil {
				return false, "", err
			}
		}
	}

	tmpLink := filepath.Join(dir, "..data_tmp")
	if !fresh {
		_ = os.Remove(tmpLink)
	}
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		return false, "", err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, dataDirName)); err != nil {
		return false, "", err
	}

	visible := map[string]bool{}
	for path := range p {
		visible[strings.SplitN(path, "/", 2)[0]] = true
	}
	for name := range visible {
		link := filepath.Join(dir, name)
		if !fresh {
			if _, err := os.Lstat(link); err == nil {
				continue
			}
		}
		if err := os.Symlink(filepath.Join(dataDirName, name), link); err != nil {
			return false, "", err
		}
	}
	if fresh {
		return true, filepath.Base(tsDir), nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, "", err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") || visible[name] || e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return false, "", err
		}
	}
	if oldTS != "" {
		if err := os.RemoveAll(filepath.Join(dir, oldTS)); err != nil {
			return false, "", err
		}
	}
	return true, filepath.Base(tsDir), nil
}

// makeDir makes dir (and its parents) unless it exists, and reports whether it made
// dir itself: one mkdir where the directory is new, where MkdirAll first stats it.
func makeDir(dir string) (bool, error) {
	err := os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil // a file of that name fails the next call, under dir
	case errors.Is(err, fs.ErrNotExist):
		return true, os.MkdirAll(dir, 0o755)
	default:
		return false, err
	}
}

// sameContent reports whether dir holds exactly the payload's files, bytes and modes.
func sameContent(dir string, p payload) (bool, error) {
	seen := 0
	same := true
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		want, ok := p[rel]
		if !ok {
			same = false
			return filepath.SkipAll
		}
		seen++
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != want.mode.Perm() {
			same = false
			return filepath.SkipAll
		}
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want.data) {
			same = false
			return filepath.SkipAll
		}
		return nil
	})
	if os.IsNotExist(err) {
		return false, nil
	}
	return same && seen == len(p), err
}
