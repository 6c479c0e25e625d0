package volume

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakeSources serves objects from maps and numbered tokens.
type fakeSources struct {
	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	clock      *testclock.FakeClock
	issued     int
	claims     map[string]*v1.PersistentVolumeClaim
	volumes    map[string]*v1.PersistentVolume
	bundles    []certificatesv1.ClusterTrustBundle
	requests   map[string]*certificatesv1.PodCertificateRequest
}

func (f *fakeSources) PersistentVolumeClaim(_ context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.claims[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f *fakeSources) PersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pv, ok := f.volumes[name]; ok {
		return pv, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func newFakeSources(clk *testclock.FakeClock) *fakeSources {
	return &fakeSources{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}, clock: clk,
		claims: map[string]*v1.PersistentVolumeClaim{}, volumes: map[string]*v1.PersistentVolume{},
		requests: map[string]*certificatesv1.PodCertificateRequest{}}
}

func (f *fakeSources) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cm, ok := f.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeSources) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f *fakeSources) ResourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	for _, c := range pod.Spec.Containers {
		if c.Name == ref.ContainerName {
			q := c.Resources.Limits[v1.ResourceName(strings.TrimPrefix(ref.Resource, "limits."))]
			return fmt.Sprint(q.Value()), nil
		}
	}
	return "", errors.New("no such container")
}

func (f *fakeSources) ServiceAccountToken(_ context.Context, pod *v1.Pod, audience string, seconds int64) (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issued++
	return fmt.Sprintf("token-%d-for-%s-%s", f.issued, pod.Name, audience), f.clock.Now().Add(time.Duration(seconds) * time.Second), nil
}

func testPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"note": "a \"quoted\" value"}},
		Spec: v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}}}},
	}
}

func newTestManager(t *testing.T) (*Manager, *fakeSources, *testclock.FakeClock) {
	clk := testclock.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	src := newFakeSources(clk)
	src.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "alpha", "b": "beta"}, BinaryData: map[string][]byte{"bin": {0, 1, 2}}}
	src.secrets["ns/creds"] = &v1.Secret{Data: map[string][]byte{"user": []byte("admin"), "pass": []byte("s3cret")}}
	return NewManager(Options{RootDir: t.TempDir(), Sources: src, Clock: clk}), src, clk
}

// visible lists the user-visible files of a volume (following symlinks) with their
// contents and modes, the way a container reading the volume sees them.
func visible(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(rel string)
	walk = func(rel string) {
		entries, err := os.ReadDir(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue
			}
			p := filepath.Join(rel, e.Name())
			info, err := os.Stat(filepath.Join(dir, p))
			if err != nil {
				t.Fatal(err)
			}
			if info.IsDir() {
				walk(p)
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, p))
			if err != nil {
				t.Fatal(err)
			}
			out[p] = fmt.Sprintf("%s %q", info.Mode().Perm(), b)
		}
	}
	walk("")
	return out
}

func TestAPIDataVolumes(t *testing.T) {
	cases := []struct {
		name    string
		source  v1.VolumeSource
		want    map[string]string
		wantErr string
	}{{
		name:   "configMap shows every key with mode 0644",
		source: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
		want:   map[string]string{"a": `-rw-r--r-- "alpha"`, "b": `-rw-r--r-- "beta"`, "bin": `-rw-r--r-- "\x00\x01\x02"`},
	}, {
		name: "configMap items at their paths with their modes",
		source: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			DefaultMode: ptr.To[int32](0o400),
			Items:       []v1.KeyToPath{{Key: "a", Path: "dir/first"}, {Key: "b", Path: "second", Mode: ptr.To[int32](0o600)}}}},
		want: map[string]string{"dir/first": `-r-------- "alpha"`, "second": `-rw------- "beta"`},
	}, {
		name:    "missing configMap",
		source:  v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}},
		wantErr: `MountVolume.SetUp failed for volume "vol" : configmap "nope" not found`,
	}, {
		name:   "missing optional configMap is an empty volume",
		source: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}},
		want:   map[string]string{},
	}, {
		name: "missing configMap key",
		source: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "zzz", Path: "z"}}}},
		wantErr: `MountVolume.SetUp failed for volume "vol" : configmap references non-existent config key: zzz`,
	}, {
		name: "path escaping the volume",
		source: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "a", Path: "../../etc/passwd"}}}},
		wantErr: `must not contain '..'`,
	}, {
		name:   "secret",
		source: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds", DefaultMode: ptr.To[int32](0o440)}},
		want:   map[string]string{"user": `-r--r----- "admin"`, "pass": `-r--r----- "s3cret"`},
	}, {
		name:    "missing secret",
		source:  v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope"}},
		wantErr: `MountVolume.SetUp failed for volume "vol" : secret "nope" not found`,
	}, {
		name: "downwardAPI",
		source: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
			{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
			{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: "limits.memory"}},
		}}},
		want: map[string]string{
			"name": `-rw-r--r-- "web"`, "app": `-rw-r--r-- "web"`,
			"labels":      `-rw-r--r-- "app=\"web\"\ntier=\"front\""`,
			"annotations": `-rw-r--r-- "note=\"a \\\"quoted\\\" value\""`,
			"mem":         `-rw-r--r-- "67108864"`,
		},
	}, {
		name: "projected merges its sources",
		source: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "a", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}},
		want: map[string]string{"token": `-rw-r--r-- "token-1-for-web-"`, "ca.crt": `-rw-r--r-- "alpha"`, "namespace": `-rw-r--r-- "ns"`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			pod := testPod(v1.Volume{Name: "vol", VolumeSource: tc.source})
			vols, err := m.SetUp(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SetUp error = %v, want %q", err, tc.wantErr)
				}
				var me *MountError
				if !errors.As(err, &me) || me.Volume != "vol" {
					t.Errorf("error %v does not name the volume", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mv := vols["vol"]
			if !mv.ReadOnly {
				t.Errorf("API data volume is not read-only")
			}
			got := visible(t, mv.Path)
			if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(tc.want)) {
				t.Errorf("volume shows\n%v\nwant\n%v", sorted(got), sorted(tc.want))
			}
		})
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+": "+v)
	}
	sort.Strings(out)
	return out
}

func TestConfigMapUpdateSwapsDataAtomically(t *testing.T) {
	m, src, _ := newTestManager(t)
	pod := testPod(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	vols, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := vols["vol"].Path
	before, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if target, _ := os.Readlink(filepath.Join(dir, "a")); target != "..data/a" {
		t.Errorf("a links to %q, want ..data/a", target)
	}

	// Unchanged content: nothing is rewritten.
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if same, _ := os.Readlink(filepath.Join(dir, "..data")); same != before {
		t.Errorf("..data moved from %q to %q without a change", before, same)
	}

	src.mu.Lock()
	src.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "ALPHA", "c": "gamma"}}
	src.mu.Unlock()
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Readlink(filepath.Join(dir, "..data"))
	if after == before || !strings.HasPrefix(after, "..20") {
		t.Errorf("..data = %q after an update (was %q), want a new timestamped directory", after, before)
	}
	want := map[string]string{"a": `-rw-r--r-- "ALPHA"`, "c": `-rw-r--r-- "gamma"`}
	if got := visible(t, dir); fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(want)) {
		t.Errorf("after update the volume shows %v, want %v", sorted(got), sorted(want))
	}
	if _, err := os.Stat(filepath.Join(dir, before)); !os.IsNotExist(err) {
		t.Errorf("old data directory %s still there: %v", before, err)
	}
}

func TestServiceAccountTokenRefresh(t *testing.T) {
	m, _, clk := newTestManager(t)
	pod := testPod(v1.Volume{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "vault", ExpirationSeconds: ptr.To[int64](1000)}},
	}}}})
	read := func() string {
		t.Helper()
		vols, err := m.SetUp(context.Background(), pod)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(vols["tok"].Path, "token"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	steps := []struct {
		advance time.Duration
		want    string
	}{
		{0, "token-1-for-web-vault"},
		{790 * time.Second, "token-1-for-web-vault"}, // younger than 80% of 1000 s
		{20 * time.Second, "token-2-for-web-vault"},  // 810 s old: refreshed
		{100 * time.Second, "token-2-for-web-vault"},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		if got := read(); got != s.want {
			t.Errorf("step %d: token file holds %q, want %q", i, got, s.want)
		}
	}
	// The second token was issued 100 s ago: due in 700 s, when the kubelet syncs the pod.
	if at, ok := m.NextRefresh(pod.UID); !ok || !at.Equal(clk.Now().Add(700*time.Second)) {
		t.Errorf("NextRefresh = %v, %v; want %v", at, ok, clk.Now().Add(700*time.Second))
	}
	if _, ok := m.NextRefresh("another-pod"); ok {
		t.Error("NextRefresh for a pod without tokens")
	}
}

func TestHostPathTypes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct {
		path     string
		typ      v1.HostPathType
		wantErr  string
		wantKind os.FileMode // checked after success; 0 for a regular file
	}{
		{filepath.Join(dir, "new/dir"), v1.HostPathDirectoryOrCreate, "", os.ModeDir},
		{dir, v1.HostPathDirectory, "", os.ModeDir},
		{filepath.Join(dir, "missing"), v1.HostPathDirectory, "hostPath type check failed: " + filepath.Join(dir, "missing") + " is not a directory", 0},
		{file, v1.HostPathDirectory, "is not a directory", 0},
		{filepath.Join(dir, "newfile"), v1.HostPathFileOrCreate, "", 0},
		{file, v1.HostPathFile, "", 0},
		{dir, v1.HostPathFile, "is not a file", 0},
		{sock, v1.HostPathSocket, "", os.ModeSocket},
		{file, v1.HostPathSocket, "is not a socket file", 0},
		{"/dev/null", v1.HostPathCharDev, "", os.ModeDevice | os.ModeCharDevice},
		{file, v1.HostPathCharDev, "is not a character device", 0},
		{"/dev/null", v1.HostPathBlockDev, "is not a block device", 0},
		{filepath.Join(dir, "anything"), v1.HostPathUnset, "", 0},
	}
	for _, tc := range cases {
		t.Run(string(tc.typ)+" "+filepath.Base(tc.path), func(t *testing.T) {
			m, _, _ := newTestManager(t)
			pod := testPod(v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: tc.path, Type: ptr.To(tc.typ)}}})
			vols, err := m.SetUp(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SetUp error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if vols["host"].Path != tc.path {
				t.Errorf("host path = %q, want %q", vols["host"].Path, tc.path)
			}
			if tc.typ == v1.HostPathUnset {
				return
			}
			info, err := os.Stat(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Type() != tc.wantKind {
				t.Errorf("%s is %v, want %v", tc.path, info.Mode().Type(), tc.wantKind)
			}
		})
	}
}

func TestEmptyDir(t *testing.T) {
	cases := []struct {
		name      string
		src       v1.EmptyDirVolumeSource
		tmpfs     bool
		wantTmpfs bool
		wantSize  int64
	}{
		{name: "disk", src: v1.EmptyDirVolumeSource{}},
		{name: "memory without tmpfs is a directory", src: v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}},
		{name: "memory on tmpfs with its size limit", src: v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("8Mi"))},
			tmpfs: true, wantTmpfs: true, wantSize: 8 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tmpfs && os.Geteuid() != 0 {
				t.Skip("mounting tmpfs needs root")
			}
			m, _, _ := newTestManager(t)
			m.opts.Tmpfs = tc.tmpfs
			pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &tc.src}})
			vols, err := m.SetUp(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			dir := vols["scratch"].Path
			t.Cleanup(func() { _ = m.TearDown(context.Background(), pod.UID) })
			if want := filepath.Join(m.opts.RootDir, "pods/uid-1/volumes/kubernetes.io~empty-dir/scratch"); dir != want {
				t.Errorf("path = %s, want %s", dir, want)
			}
			info, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode().Perm() != 0o777 {
				t.Errorf("mode = %v, want 0777", info.Mode().Perm())
			}
			var fs syscall.Statfs_t
			if err := syscall.Statfs(dir, &fs); err != nil {
				t.Fatal(err)
			}
			const tmpfsMagic = 0x01021994
			if isTmpfs := fs.Type == tmpfsMagic; isTmpfs != tc.wantTmpfs {
				if mounted, _ := isMountPoint(dir); mounted == tc.wantTmpfs {
					return // the test directory itself may be on tmpfs
				}
				t.Errorf("on tmpfs = %v, want %v", isTmpfs, tc.wantTmpfs)
			}
			if tc.wantSize > 0 {
				if size := int64(fs.Blocks) * fs.Bsize; size != tc.wantSize {
					t.Errorf("tmpfs size = %d, want %d", size, tc.wantSize)
				}
			}
			// A second SetUp does not mount again.
			if _, err := m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if err := m.TearDown(context.Background(), pod.UID); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
				t.Errorf("pod directory still there after TearDown: %v", err)
			}
		})
	}
}

func TestContainerMounts(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := testPod(
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
	)
	vols, err := m.SetUp(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	cfgDir, scratch := vols["cfg"].Path, vols["scratch"].Path
	dataDir, _ := os.Readlink(filepath.Join(cfgDir, "..data"))
	hostToContainer := v1.MountPropagationHostToContainer
	cases := []struct {
		name    string
		mount   v1.VolumeMount
		want    *runtimeapi.Mount
		wantErr string
	}{
		{name: "configMap is read-only", mount: v1.VolumeMount{Name: "cfg", MountPath: "/etc/cfg"},
			want: &runtimeapi.Mount{ContainerPath: "/etc/cfg", HostPath: cfgDir, Readonly: true}},
		{name: "emptyDir read-only on request", mount: v1.VolumeMount{Name: "scratch", MountPath: "/data", ReadOnly: true, MountPropagation: &hostToContainer},
			want: &runtimeapi.Mount{ContainerPath: "/data", HostPath: scratch, Readonly: true, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}},
		{name: "subPath of a configMap key is the file", mount: v1.VolumeMount{Name: "cfg", MountPath: "/etc/a.conf", SubPath: "a"},
			want: &runtimeapi.Mount{ContainerPath: "/etc/a.conf", HostPath: filepath.Join(cfgDir, dataDir, "a"), Readonly: true}},
		{name: "missing subPath is created in an emptyDir", mount: v1.VolumeMount{Name: "scratch", MountPath: "/logs", SubPath: "logs/web"},
			want: &runtimeapi.Mount{ContainerPath: "/logs", HostPath: filepath.Join(scratch, "logs/web")}},
		{name: "subPathExpr", mount: v1.VolumeMount{Name: "scratch", MountPath: "/mine", SubPathExpr: "$(POD_NAME)"},
			want: &runtimeapi.Mount{ContainerPath: "/mine", HostPath: filepath.Join(scratch, "web")}},
		{name: "subPath escaping", mount: v1.VolumeMount{Name: "scratch", MountPath: "/x", SubPath: "../../.."}, wantErr: "must be a relative path inside the volume"},
		{name: "unknown volume", mount: v1.VolumeMount{Name: "nope", MountPath: "/x"}, wantErr: `cannot find volume "nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{tc.mount}}
			got, err := ContainerMounts(c, vols, map[string]string{"POD_NAME": "web"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].String() != tc.want.String() {
				t.Errorf("mounts = %v, want [%v]", got, tc.want)
			}
		})
	}
}

func TestHostsFile(t *testing.T) {
	m, _, _ := newTestManager(t)
	pod := testPod()
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.1.1", Hostnames: []string{"foo.local", "bar.local"}}}
	path, err := m.HostsFile(pod, "web", "svc1.ns.svc.cluster.local", []string{"10.244.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
		"10.244.0.7\tweb.svc1.ns.svc.cluster.local\tweb\n\n# Entries added by HostAliases.\n10.1.1.1\tfoo.local\tbar.local\n"
	if string(b) != want {
		t.Errorf("hosts file:\n%s\nwant:\n%s", b, want)
	}
}

func TestVolumeKeepsItsContentWhenItsSourceGoes(t *testing.T) {
	m, src, _ := newTestManager(t)
	pod := testPod(v1.Volume{Name: "vol", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
	if _, err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	src.mu.Lock()
	delete(src.configMaps, "ns/cfg")
	src.mu.Unlock()
	vols, err := m.SetUp(context.Background(), pod)
	if err == nil || !strings.Contains(err.Error(), `configmap "cfg" not found`) {
		t.Errorf("SetUp error = %v, want the missing configmap reported", err)
	}
	mv, ok := vols["vol"]
	if !ok {
		t.Fatal("a volume set up before is dropped when its source goes")
	}
	if b, _ := os.ReadFile(filepath.Join(mv.Path, "a")); string(b) != "alpha" {
		t.Errorf("volume content = %q, want the last content", b)
	}
}
