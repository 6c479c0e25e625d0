package version

import (
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	clientgoversion "k8s.io/client-go/pkg/version"
)

// A test binary is built without -ldflags: its versions must still parse as kubectl parses them.
func TestUnstampedBuildParses(t *testing.T) {
	for name, got := range map[string]string{"component-base": Get().GitVersion, "client-go": clientgoversion.Get().GitVersion} {
		v, err := utilversion.ParseSemantic(got)
		if err != nil {
			t.Fatalf("%s version %q: %v", name, got, err)
		}
		if v.Major() != 1 || v.Minor() != 37 {
			t.Errorf("%s version %q, want 1.37.x", name, got)
		}
	}
	if Get().Major != "1" || Get().Minor != "37" {
		t.Errorf("major/minor %q/%q", Get().Major, Get().Minor)
	}
}

func TestLDFlags(t *testing.T) {
	got := LDFlags("abc", "clean", "2026-01-02T03:04:05Z")
	for _, want := range []string{"-X k8s.io/component-base/version.gitVersion=v1.37.2+mizzen", "-X k8s.io/client-go/pkg/version.gitCommit=abc",
		"-X k8s.io/component-base/version.buildDate=2026-01-02T03:04:05Z", "-X k8s.io/client-go/pkg/version.gitTreeState=clean"} {
		if !strings.Contains(got, want) {
			t.Errorf("LDFlags lacks %q: %s", want, got)
		}
	}
}
