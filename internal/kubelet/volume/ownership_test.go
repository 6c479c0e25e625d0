package volume

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// owner is what ls -ln shows of a path: user, group and mode bits (with setgid).
type owner struct {
	uid, gid int
	mode     os.FileMode
}

func ownerOf(t *testing.T, path string) owner {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := info.Sys().(*syscall.Stat_t)
	return owner{uid: int(st.Uid), gid: int(st.Gid), mode: info.Mode() & (os.ModePerm | os.ModeSetgid)}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing file ownership needs root; run the tests as root to check fsGroup handling")
	}
}

func withFSGroup(pod *v1.Pod, gid int64, policy *v1.PodFSGroupChangePolicy) *v1.Pod {
	if pod.Spec.SecurityContext == nil {
		pod.Spec.SecurityContext = &v1.PodSecurityContext{}
	}
	pod.Spec.SecurityContext.FSGroup = &gid
	pod.Spec.SecurityContext.FSGroupChangePolicy = policy
	return pod
}

func TestEmptyDirFSGroup(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name    string
		medium  v1.StorageMedium
		tmpfs   bool
		fsGroup int64 // -1: none
		want    owner
	}{
		{name: "disk without fsGroup", fsGroup: -1, want: owner{gid: 0, mode: 0o777}},
		{name: "disk with fsGroup", fsGroup: 2000, want: owner{gid: 2000, mode: os.ModeSetgid | 0o777}},
		{name: "tmpfs with fsGroup", medium: v1.StorageMediumMemory, tmpfs: true, fsGroup: 2000, want: owner{gid: 2000, mode: os.ModeSetgid | 0o777}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			m.opts.Tmpfs = tc.tmpfs
			pod := testPod(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: tc.medium}}})
			if tc.fsGroup >= 0 {
				withFSGroup(pod, tc.fsGroup, nil)
			}
			t.Cleanup(func() { _ = m.TearDown(context.Background(), pod.UID) })
			// The second SetUp is an ordinary pod sync: it must keep what the first set.
			for range 2 {
				vols, err := m.SetUp(context.Background(), pod)
				if err != nil {
					t.Fatal(err)
				}
				if got := ownerOf(t, vols["scratch"].Path); got != tc.want {
					t.Errorf("volume directory = %+v, want %+v", got, tc.want)
				}
			}
			if tc.tmpfs {
				if mounted, err := isMountPoint(m.volumeDir(pod.UID, kindEmptyDir, "scratch")); err != nil || !mounted {
					t.Errorf("emptyDir with medium Memory is not a mount point (err %v)", err)
				}
			}
			// What a container writes there belongs to the fsGroup.
			dir := m.volumeDir(pod.UID, kindEmptyDir, "scratch")
			if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "sub", "f"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if got := ownerOf(t, filepath.Join(dir, "sub", "f")).gid; got != tc.want.gid {
				t.Errorf("group of a file created in the volume = %d, want %d", got, tc.want.gid)
			}
		})
	}
}

func TestEmptyDirFSGroupChangePolicy(t *testing.T) {
	requireRoot(t)
	const fsGroup, otherGroup = 2000, 3000
	cases := []struct {
		name       string
		policy     *v1.PodFSGroupChangePolicy
		breakRoot  bool // the root lost its group before the restart
		wantDeep   owner
		wantDeepOK bool // the deep file was fixed
	}{
		{name: "unset policy walks like Always", policy: nil, wantDeepOK: true},
		{name: "Always walks", policy: ptr.To(v1.FSGroupChangeAlways), wantDeepOK: true},
		{name: "OnRootMismatch skips when the root is right", policy: ptr.To(v1.FSGroupChangeOnRootMismatch)},
		{name: "OnRootMismatch walks when the root is wrong", policy: ptr.To(v1.FSGroupChangeOnRootMismatch), breakRoot: true, wantDeepOK: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, src, clk := newTestManager(t)
			pod := withFSGroup(testPod(v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}), fsGroup, tc.policy)
			if _, err := m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			dir := m.volumeDir(pod.UID, kindEmptyDir, "data")
			deep := filepath.Join(dir, "a", "b", "file")
			if err := os.MkdirAll(filepath.Dir(deep), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(deep, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(deep, -1, otherGroup); err != nil {
				t.Fatal(err)
			}
			stale := owner{gid: otherGroup, mode: 0o600}

			// A sync of the same kubelet does not walk the volume again.
			if _, err := m.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if got := ownerOf(t, deep); got != stale {
				t.Fatalf("deep file after a second sync = %+v, want it untouched %+v", got, stale)
			}

			if tc.breakRoot {
				if err := os.Lchown(dir, -1, otherGroup); err != nil {
					t.Fatal(err)
				}
			}
			// A restarted kubelet sets the volume up again.
			restarted := NewManager(Options{RootDir: m.opts.RootDir, Sources: src, Clock: clk})
			if _, err := restarted.SetUp(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			want := stale
			if tc.wantDeepOK {
				want = owner{gid: fsGroup, mode: 0o660}
			}
			if got := ownerOf(t, deep); got != want {
				t.Errorf("deep file after restart = %+v, want %+v", got, want)
			}
			if got, want := ownerOf(t, dir), (owner{gid: fsGroup, mode: os.ModeSetgid | 0o777}); got != want {
				t.Errorf("volume directory after restart = %+v, want %+v", got, want)
			}
		})
	}
}

func TestSetVolumeOwnership(t *testing.T) {
	requireRoot(t)
	const gid = 2000
	cases := []struct {
		name     string
		readOnly bool
		wantDir  owner
		wantFile owner
		wantExec owner
	}{
		{name: "writable volume", wantDir: owner{gid: gid, mode: os.ModeSetgid | 0o770}, wantFile: owner{gid: gid, mode: 0o660}, wantExec: owner{gid: gid, mode: 0o764}},
		{name: "read-only volume", readOnly: true, wantDir: owner{gid: gid, mode: os.ModeSetgid | 0o750}, wantFile: owner{gid: gid, mode: 0o640}, wantExec: owner{gid: gid, mode: 0o744}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "vol")
			outside := filepath.Join(base, "outside")
			if err := os.MkdirAll(filepath.Join(root, "dir"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(root, 0o700); err != nil {
				t.Fatal(err)
			}
			for path, mode := range map[string]os.FileMode{filepath.Join(root, "dir", "file"): 0o600, filepath.Join(root, "run.sh"): 0o744, outside: 0o600} {
				if err := os.WriteFile(path, nil, mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, mode); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
				t.Fatal(err)
			}

			if err := setVolumeOwnership(root, gid, nil, tc.readOnly); err != nil {
				t.Fatal(err)
			}
			for path, want := range map[string]owner{
				root:                               tc.wantDir,
				filepath.Join(root, "dir"):         tc.wantDir,
				filepath.Join(root, "dir", "file"): tc.wantFile,
				filepath.Join(root, "run.sh"):      tc.wantExec,
				outside:                            {gid: 0, mode: 0o600}, // not reached through the symlink
			} {
				if got := ownerOf(t, path); got != want {
					t.Errorf("%s = %+v, want %+v", path, got, want)
				}
			}
			var link syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(root, "link"), &link); err != nil {
				t.Fatal(err)
			}
			if link.Gid != gid {
				t.Errorf("symlink group = %d, want %d", link.Gid, gid)
			}
		})
	}
}

func TestServiceAccountTokenOwnership(t *testing.T) {
	requireRoot(t)
	user := func(uid int64) *v1.SecurityContext { return &v1.SecurityContext{RunAsUser: &uid} }
	cases := []struct {
		name        string
		podUser     *int64
		fsGroup     *int64
		defaultMode *int32
		init        []v1.Container
		containers  []v1.Container
		wantToken   owner
		wantConfig  owner
		wantRoot    owner
	}{
		{name: "no security context", wantToken: owner{mode: 0o644}, wantConfig: owner{mode: 0o644}, wantRoot: owner{mode: 0o755}},
		{name: "defaultMode applies", defaultMode: ptr.To[int32](0o400), wantToken: owner{mode: 0o400}, wantConfig: owner{mode: 0o400}, wantRoot: owner{mode: 0o755}},
		{name: "fsGroup: token 0640 in the group", fsGroup: ptr.To[int64](2000), defaultMode: ptr.To[int32](0o444),
			wantToken: owner{gid: 2000, mode: 0o640}, wantConfig: owner{gid: 2000, mode: 0o444}, wantRoot: owner{gid: 2000, mode: os.ModeSetgid | 0o755}},
		{name: "pod runAsUser: token 0600 owned by the user", podUser: ptr.To[int64](1000),
			wantToken: owner{uid: 1000, mode: 0o600}, wantConfig: owner{mode: 0o644}, wantRoot: owner{mode: 0o755}},
		{name: "container runAsUser overrides the pod's", podUser: ptr.To[int64](1000), containers: []v1.Container{{Name: "c", SecurityContext: user(1001)}},
			wantToken: owner{uid: 1001, mode: 0o600}, wantConfig: owner{mode: 0o644}, wantRoot: owner{mode: 0o755}},
		{name: "init and regular containers as one user", init: []v1.Container{{Name: "i", SecurityContext: user(1000)}}, containers: []v1.Container{{Name: "c", SecurityContext: user(1000)}, {Name: "d", SecurityContext: user(1000)}},
			wantToken: owner{uid: 1000, mode: 0o600}, wantConfig: owner{mode: 0o644}, wantRoot: owner{mode: 0o755}},
		{name: "init container as another user", init: []v1.Container{{Name: "i", SecurityContext: user(1001)}}, containers: []v1.Container{{Name: "c", SecurityContext: user(1000)}},
			wantToken: owner{mode: 0o644}, wantConfig: owner{mode: 0o644}, wantRoot: owner{mode: 0o755}},
		{name: "a container without runAsUser", containers: []v1.Container{{Name: "c", SecurityContext: user(1000)}, {Name: "d"}},
			wantToken: owner{mode: 0o644}, wantConfig: owner{mode: 0o644}, wantRoot: owner{mode: 0o755}},
		{name: "fsGroup and one user", podUser: ptr.To[int64](1000), fsGroup: ptr.To[int64](2000),
			wantToken: owner{uid: 1000, gid: 2000, mode: 0o640}, wantConfig: owner{gid: 2000, mode: 0o644}, wantRoot: owner{gid: 2000, mode: os.ModeSetgid | 0o755}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _, _ := newTestManager(t)
			pod := testPod(v1.Volume{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
				DefaultMode: tc.defaultMode,
				Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "a", Path: "ca.crt"}}}},
				},
			}}})
			pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: tc.podUser, FSGroup: tc.fsGroup}
			pod.Spec.InitContainers = tc.init
			if tc.containers != nil {
				pod.Spec.Containers = tc.containers
			}
			vols, err := m.SetUp(context.Background(), pod)
			if err != nil {
				t.Fatal(err)
			}
			dir := vols["kube-api-access"].Path
			for path, want := range map[string]owner{
				filepath.Join(dir, "token"):  tc.wantToken,
				filepath.Join(dir, "ca.crt"): tc.wantConfig,
				dir:                          tc.wantRoot,
			} {
				if got := ownerOf(t, path); got != want {
					t.Errorf("%s = %+v, want %+v", filepath.Base(path), got, want)
				}
			}
		})
	}
}

func TestHostPathIsNeverChowned(t *testing.T) {
	requireRoot(t)
	m, _, _ := newTestManager(t)
	host := filepath.Join(t.TempDir(), "host")
	if err := os.Mkdir(host, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := map[string]owner{host: ownerOf(t, host), filepath.Join(host, "f"): ownerOf(t, filepath.Join(host, "f"))}
	for _, policy := range []*v1.PodFSGroupChangePolicy{nil, ptr.To(v1.FSGroupChangeAlways), ptr.To(v1.FSGroupChangeOnRootMismatch)} {
		pod := withFSGroup(testPod(v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: ptr.To(v1.HostPathDirectory)}}}), 2000, policy)
		if _, err := m.SetUp(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		for path, want := range before {
			if got := ownerOf(t, path); got != want {
				t.Errorf("policy %v: %s = %+v, want unchanged %+v", ptr.Deref(policy, ""), path, got, want)
			}
		}
	}
}
