package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/internal/testing/apiserver"
)

// TestInformerAcrossRestart: a client-go informer lists and watches pods while the
// apiserver is stopped and started again on the same data; it must see every change
// exactly once.
func TestInformerAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	srv := apiserver.StartWithDir(t, dir)
	// The kubeconfig keeps pointing at the first server's port; the restarted server
	// binds the same port.
	port := srv.URL[len("https://127.0.0.1:"):]
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	seen := map[string][]string{} // pod name -> event kinds in order
	record := func(kind string, obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		seen[pod.Name] = append(seen[pod.Name], kind)
		mu.Unlock()
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { record("add", obj) },
		UpdateFunc: func(old, obj interface{}) { record("update", obj) },
		DeleteFunc: func(obj interface{}) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			record("delete", obj)
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	create := func(name string) {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		create(fmt.Sprintf("before-%d", i))
	}
	waitSeen(t, &mu, seen, "before-4", 1)

	srv.Stop()
	srv2 := apiserver.StartWithDirPort(t, dir, port)
	_ = srv2
	for i := 0; i < 5; i++ {
		create(fmt.Sprintf("after-%d", i))
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "before-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSeen(t, &mu, seen, "after-4", 1)
	waitSeen(t, &mu, seen, "before-0", 2)

	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < 5; i++ {
		if got := seen[fmt.Sprintf("after-%d", i)]; len(got) != 1 || got[0] != "add" {
			t.Errorf("after-%d: events %v, want exactly [add]", i, got)
		}
		want := []string{"add"}
		if i == 0 {
			want = []string{"add", "delete"}
		}
		if got := seen[fmt.Sprintf("before-%d", i)]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("before-%d: events %v, want %v", i, got, want)
		}
	}
}

func waitSeen(t *testing.T, mu *sync.Mutex, seen map[string][]string, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(seen[name])
		mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("informer did not see %d events for %s", n, name)
}
