package hollow

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var steadyProfile = flag.String("steady-cpuprofile", "", "BenchmarkHollowNodeCPU writes a CPU profile of its steady-state window here")

// BenchmarkHollowNodeCPU runs hollow nodes on a fake clientset with 30 pods each, every
// pod with the projected volume the service account admission gives pods (a token,
// kube-root-ca.crt and the namespace), and reports the process's CPU: until every pod
// is Running (per pod), then over a window of steady state (per node and second),
// where each node relists its runtime every second and syncs every pod about once a
// minute (a 30 s window sees about half of them).
// The fake clientset has no network and no apiserver, so the figures are the kubelets'
// own work, plus the fake's (which delivers every pod to every node: it ignores field
// selectors). Run with -benchtime 1x.
func BenchmarkHollowNodeCPU(b *testing.B) {
	const nodes, podsPerNode, window = 20, 30, 30 * time.Second
	client := k8sfake.NewSimpleClientset(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "default"},
		Data:       map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\n" + string(make([]byte, 1000)) + "\n-----END CERTIFICATE-----\n"},
	})
	hub := &podHub{}
	hub.install(client)
	client.PrependReactor("create", "serviceaccounts", func(a clienttesting.Action) (bool, apiruntime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{
			Token: "eyJhbGciOiJSUzI1NiJ9." + string(make([]byte, 900)), ExpirationTimestamp: metav1.NewTime(time.Now().Add(time.Hour))}}, nil
	})
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{
			Count:     nodes,
			NewClient: func(string) (kubernetes.Interface, error) { return client, nil },
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	wait := func(what string, cond func() bool) {
		deadline := time.Now().Add(5 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	wait("every kubelet watching pods", func() bool { return hub.count() >= nodes })
	start := cpu()
	for n := range nodes {
		for i := range podsPerNode {
			name := fmt.Sprintf("p-%d-%d", n, i)
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
					Labels: map[string]string{"app": "density", "name": name}},
				Spec: v1.PodSpec{NodeName: fmt.Sprintf("hollow-node-%d", n), ServiceAccountName: "default",
					Containers: []v1.Container{{Name: "c", Image: "pause:3.10", VolumeMounts: []v1.VolumeMount{
						{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
					Volumes: []v1.Volume{{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
						DefaultMode: ptr.To[int32](0o644),
						Sources: []v1.VolumeProjection{
							{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
							{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
								Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
							{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
								{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
						}}}}}},
			}
			if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	wait("every pod Running", func() bool { return runningPods(ctx, client) == nodes*podsPerNode })
	running := cpu()
	if *steadyProfile != "" {
		f, err := os.Create(*steadyProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	time.Sleep(window)
	steady := cpu()
	if *steadyProfile != "" {
		pprof.StopCPUProfile()
	}
	b.ReportMetric(float64(running-start)/float64(time.Millisecond)/(nodes*podsPerNode), "start-CPU-ms/pod")
	b.ReportMetric(float64(steady-running)/float64(time.Millisecond)/nodes/window.Seconds(), "steady-CPU-ms/node/s")
}
