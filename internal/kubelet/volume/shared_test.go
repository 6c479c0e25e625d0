package volume

import (
	"strings"
	"testing"
)

func TestMountOf(t *testing.T) {
	const mountinfo = `27 1 8:1 / / rw,relatime - ext4 /dev/vda rw
40 27 0:30 / /tmp rw shared:5 - tmpfs tmpfs rw
41 27 8:1 /srv /srv/data\040dir rw master:3 - ext4 /dev/vda rw
42 41 8:1 /srv /srv/data\040dir rw shared:9 - ext4 /dev/vda rw
`
	for _, tc := range []struct {
		dir, point string
		shared     bool
	}{
		{"/var/lib/mizzen/agent/kubelet", "/", false},
		{"/tmp/x/kubelet", "/tmp", true},
		{"/tmpfoo", "/", false},
		{"/srv/data dir/kubelet", "/srv/data dir", true}, // the mount stacked last counts
	} {
		point, shared, err := mountOf(strings.NewReader(mountinfo), tc.dir)
		if err != nil || point != tc.point || shared != tc.shared {
			t.Errorf("mountOf(%q) = %q %v %v; want %q %v", tc.dir, point, shared, err, tc.point, tc.shared)
		}
	}
}
