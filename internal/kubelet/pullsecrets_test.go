package kubelet

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMatchCredentials(t *testing.T) {
	secret := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {
		"https://index.docker.io/v1/": {"username": "hub", "password": "h"},
		"registry.example.com": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("reg:r")) + `"},
		"registry.example.com/team": {"username": "team", "password": "t"},
		"*.cache.example.com": {"username": "glob", "password": "g"},
		"localhost:5000": {"username": "local", "password": "l"}}}`)}}
	creds := parsePullSecret(secret)
	for _, tc := range []struct {
		image string
		users []string
	}{
		{"busybox", []string{"hub"}},
		{"docker.io/library/busybox:1.36", []string{"hub"}},
		{"registry.example.com/team/app:v1", []string{"team", "reg"}},
		{"registry.example.com/teamwork/app", []string{"reg"}},
		{"registry.example.com/other@sha256:abcd", []string{"reg"}},
		{"eu.cache.example.com/app", []string{"glob"}},
		{"a.b.cache.example.com/app", nil},
		{"localhost:5000/app", []string{"local"}},
		{"localhost/app", nil},
		{"quay.io/app", nil},
	} {
		var users []string
		for _, a := range matchCredentials(creds, tc.image) {
			users = append(users, a.Username)
		}
		if strings.Join(users, ",") != strings.Join(tc.users, ",") {
			t.Errorf("%s: credentials of %v, want %v", tc.image, users, tc.users)
		}
	}
	legacy := &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"quay.io": {"username": "q", "password": "p"}}`)}}
	if got := matchCredentials(parsePullSecret(legacy), "quay.io/org/app"); len(got) != 1 || got[0].Username != "q" || got[0].Password != "p" {
		t.Errorf("dockercfg credentials %v", got)
	}
	if got := parsePullSecret(&v1.Secret{Type: v1.SecretTypeOpaque, Data: secret.Data}); got != nil {
		t.Errorf("an Opaque secret gave credentials %v", got)
	}
}

// TestPrivateImageNeedsItsPullSecret runs a pod of a private image first without and
// then with the pull secret it needs.
func TestPrivateImageNeedsItsPullSecret(t *testing.T) {
	h := newHarness(t)
	h.rt.RequireAuth("registry.local/app:1.0", "robot", "s3cret")
	ctx := context.Background()
	_, err := h.client.CoreV1().Secrets("default").Create(ctx, &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{"registry.local":{"username":"robot","password":"s3cret"}}}`)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.start()

	without := newPod("without", "app")
	without.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "missing"}}
	h.createPod(without)
	h.waitPod("without", "ErrImagePull or ImagePullBackOff", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return cs != nil && cs.State.Waiting != nil &&
			(cs.State.Waiting.Reason == reasonErrImagePull || cs.State.Waiting.Reason == reasonImagePullBackOff)
	})
	if msg := h.waitEvent("without", "Failed"); !strings.Contains(msg, "401 Unauthorized") {
		t.Errorf("Failed event %q, want the registry's 401", msg)
	}
	if msg := h.waitEvent("without", "FailedToRetrieveImagePullSecret"); !strings.Contains(msg, "(missing)") {
		t.Errorf("FailedToRetrieveImagePullSecret event %q", msg)
	}

	with := newPod("with", "app")
	with.UID = "uid-with"
	with.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	h.createPod(with)
	h.waitPod("with", "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
}
