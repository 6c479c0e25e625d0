package core

import (
	"math/rand/v2"
	"testing"

	"github.com/distribution/reference"
)

var pullPolicyImages = []string{
	"nginx", "nginx:latest", "nginx:1.27", "library/nginx:1.27-alpine", "docker.io/library/nginx",
	"registry.example/app:1.0", "registry.k8s.io/pause:3.10", "gcr.io/a/b/c:v1_2.3-x",
	"localhost/app", "localhost:5000/app:1", "my-registry.local/team/app__x:tag",
	"a.b-c.d/e--f.g_h:latest", "quay.io/x/y:_tag", "Upper/app", "app:UPPER", "APP",
	"app@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"app:1@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "", ":", "app:", "/app", "app/",
	"-app", "app-", "a..b", "a___b", "a.-b", "-reg.io/app", "reg-.io/app", "reg..io/app", "reg.io/app:-x",
	"reg.io/app:.x", "reg.io:/app", "[::1]:5000/app", "192.168.1.1/app:v", " app", "app ", "app:t:t",
	"a/b/c/d/e/f/g:" + string(make([]byte, 0)), "x:" + "t23456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
}

// checkPlainImageTag fails t if plainImageTag answers for an image the parser
// rejects, or with another tag than the parser's.
func checkPlainImageTag(t *testing.T, image string) {
	tag, ok := plainImageTag(image)
	if !ok {
		return
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		t.Errorf("plainImageTag(%q) answered %q; the parser rejects it: %v", image, tag, err)
		return
	}
	want := ""
	if tagged, ok := named.(reference.Tagged); ok {
		want = tagged.Tag()
	}
	if _, digested := named.(reference.Digested); digested || tag != want {
		t.Errorf("plainImageTag(%q) = %q; the parser's tag is %q (digest: %v)", image, tag, want, digested)
	}
}

// TestDefaultPullPolicyMatchesTheParser checks the hand-checked plain names against
// the parser, and that the common shapes take the hand-checked path.
func TestDefaultPullPolicyMatchesTheParser(t *testing.T) {
	for _, image := range pullPolicyImages {
		checkPlainImageTag(t, image)
		if got, want := defaultPullPolicy(image), parsedPullPolicy(image); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, the parser's %s", image, got, want)
		}
	}
	for _, image := range []string{"nginx", "nginx:1.27", "registry.example/app:1.0", "registry.k8s.io/pause:3.10"} {
		if _, ok := plainImageTag(image); !ok {
			t.Errorf("plainImageTag(%q) left a plain name to the parser", image)
		}
	}
}

// TestDefaultPullPolicyOnRandomNames compares random strings over the characters
// that matter to the grammar (a fixed seed: the same strings every run).
func TestDefaultPullPolicyOnRandomNames(t *testing.T) {
	const alphabet = "abz09AZ._-/:@_-.a0/"
	r := rand.New(rand.NewPCG(16, 16))
	for range 50000 {
		b := make([]byte, 1+r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		image := string(b)
		checkPlainImageTag(t, image)
		if got, want := defaultPullPolicy(image), parsedPullPolicy(image); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, the parser's %s", image, got, want)
		}
	}
}

func FuzzDefaultPullPolicy(f *testing.F) {
	for _, image := range pullPolicyImages {
		f.Add(image)
	}
	f.Fuzz(func(t *testing.T, image string) {
		checkPlainImageTag(t, image)
		if got, want := defaultPullPolicy(image), parsedPullPolicy(image); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, the parser's %s", image, got, want)
		}
	})
}
