package kubelet_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/cri/fake"
	"mizzen/internal/kubelet"
	"mizzen/internal/testing/apiserver"
	"mizzen/internal/testing/poll"
)

// TestAgainstRealAPIServer runs a kubelet on the fake runtime against a real apiserver on
// embedded etcd: registration, lease, a pod to Running, a crash-looping container, and a
// graceful deletion that ends with the pod object gone.
func TestAgainstRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd and the apiserver")
	}
	cfg := apiserver.Start(t)
	client := kubernetes.NewForConfigOrDie(cfg)
	rt := fake.New(fake.Options{RuntimeName: "containerd", RuntimeVersion: "1.6.20"})
	rt.SetContainerBehavior("crasher", fake.Behavior{Exits: true, After: 200 * time.Millisecond, ExitCode: 1})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- kubelet.Run(ctx, kubelet.Options{
			Client: client, NodeName: "node-a", Runtime: rt.Client(), Images: rt.Client(),
			NodeIP:       "10.0.0.9",
			Machine:      &kubelet.MachineInfo{CPUCores: 2, MemoryBytes: 4 << 30, EphemeralStorage: 20 << 30},
			RootDir:      t.TempDir(),
			NoTmpfs:      true,
			RelistPeriod: 100 * time.Millisecond, ResyncPeriod: time.Second,
			LeaseRenewInterval: time.Second, NodeStatusUpdateFrequency: time.Second,
			Logger: slog.New(slog.NewTextHandler(testLogOutput(), nil)),
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubelet: %v", err)
		}
	})

	waitFor(t, "node Ready", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	waitFor(t, "node lease", func() bool {
		l, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "node-a"
	})

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName: "node-a",
			Containers: []v1.Container{
				{Name: "app", Image: "registry.local/app:1", Env: []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{
					FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				{Name: "crasher", Image: "registry.local/crasher:1"},
			},
		},
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *v1.Pod
	waitFor(t, "pod Running with a restarted crasher", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil || p.Status.Phase != v1.PodRunning {
			return false
		}
		got = p
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "crasher" && cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil {
				return true
			}
		}
		return false
	})
	if got.Status.PodIP == "" || got.Status.HostIP != "10.0.0.9" || got.Status.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("status: podIP %q hostIP %q qos %q", got.Status.PodIP, got.Status.HostIP, got.Status.QOSClass)
	}
	// The kubelet caches pods without their managedFields and writes status from that
	// cache: the creator's entry must survive its writes, beside the kubelet's own.
	var creator, status bool
	for _, f := range got.ManagedFields {
		creator = creator || f.Subresource == "" && f.Operation == metav1.ManagedFieldsOperationUpdate
		status = status || f.Subresource == "status"
	}
	if !creator || !status {
		t.Errorf("managedFields after the kubelet's status writes: creator's entry %v, status entry %v; want both: %+v", creator, status, got.ManagedFields)
	}

	if err := client.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod object removed after graceful deletion", func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	waitFor(t, "runtime cleaned up", func() bool {
		sbs, _ := rt.Client().ListPodSandbox(ctx, nil)
		return len(sbs) == 0
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 60*time.Second, 100*time.Millisecond, cond)
}

// testLogOutput is where the kubelet logs in this test: stderr with -v, else nowhere.
func testLogOutput() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return io.Discard
}
