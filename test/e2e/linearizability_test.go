package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/linearizability"
)

// TestLinearizableThroughEtcdLeaderKill: clients of two apiservers read and
// compare-and-set a few ConfigMaps (updates carrying the resourceVersion they read)
// while the etcd leader is killed and later restarted; the history they saw must be
// linearizable, and writes must go on after the kill.
func TestLinearizableThroughEtcdLeaderKill(t *testing.T) {
	sideBySide(t)
	if testing.Short() {
		t.Skip("runs an etcd cluster")
	}
	ec := startEtcdCluster(t)
	ctx := context.Background()
	keys := []string{"lin-0", "lin-1", "lin-2"}
	history := linearizability.NewHistory()
	var writesAfterKill atomic.Int64
	var killed atomic.Bool

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		client := ec.a
		if w%2 == 1 {
			client = ec.b
		}
		wg.Add(1)
		go func(w int, client *kubernetes.Clientset) {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := keys[rand.IntN(len(keys))]
				value, cm, ok := recordRead(ctx, history, w, client, key)
				if !ok || rand.IntN(2) == 0 {
					continue
				}
				if recordCAS(ctx, history, w, client, key, value, cm, fmt.Sprintf("w%d-%d", w, n)) == linearizability.OK && killed.Load() {
					writesAfterKill.Add(1)
				}
			}
		}(w, client)
	}

	time.Sleep(5 * time.Second)
	leader := etcdLeader(t, ec)
	t.Logf("killing etcd member %d, the leader", leader)
	ec.members[leader].kill()
	killed.Store(true)
	time.Sleep(8 * time.Second)
	ec.members[leader] = startProcess(t, ec.memberArgs[leader]...)
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()

	t.Logf("%d operations recorded, %d writes acknowledged after the kill", history.Len(), writesAfterKill.Load())
	if writesAfterKill.Load() == 0 {
		t.Fatal("no write succeeded after the etcd leader was killed")
	}
	if got := history.Check(2 * time.Minute); got != porcupine.Ok {
		t.Fatalf("the history is not linearizable: %s", got)
	}
}

// recordRead gets key and records what it saw; ok is false when the read failed (a
// failed read says nothing and is left out).
func recordRead(ctx context.Context, h *linearizability.History, client int, c *kubernetes.Clientset, key string) (string, *corev1.ConfigMap, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	call := h.Now()
	cm, err := c.CoreV1().ConfigMaps("default").Get(ctx, key, metav1.GetOptions{})
	ret := h.Now()
	switch {
	case apierrors.IsNotFound(err):
		h.Add(client, linearizability.Input{Key: key, Kind: linearizability.Read}, linearizability.Output{}, call, ret)
		return "", nil, true
	case err != nil:
		return "", nil, false
	}
	value := cm.Data["v"]
	h.Add(client, linearizability.Input{Key: key, Kind: linearizability.Read}, linearizability.Output{Value: value}, call, ret)
	return value, cm, true
}

// recordCAS writes next over what was read (a create when nothing was) and records it.
func recordCAS(ctx context.Context, h *linearizability.History, client int, c *kubernetes.Clientset, key, old string, cm *corev1.ConfigMap, next string) linearizability.Result {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	in := linearizability.Input{Key: key, Kind: linearizability.CAS, Old: old, New: next}
	call := h.Now()
	var err error
	if cm == nil {
		_, err = c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key}, Data: map[string]string{"v": next}}, metav1.CreateOptions{})
	} else {
		cm = cm.DeepCopy()
		cm.Data = map[string]string{"v": next}
		_, err = c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{})
	}
	ret := h.Now()
	result := linearizability.OK
	switch {
	case err == nil:
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		result = linearizability.Conflict
	default:
		result = linearizability.Unknown
	}
	h.Add(client, in, linearizability.Output{Result: result}, call, ret)
	return result
}

// etcdLeader is the index of the member that leads.
func etcdLeader(t *testing.T, ec *etcdCluster) int {
	t.Helper()
	clientURLs := ec.clientURLs
	var tlsCfg *tls.Config // members serving plain HTTP (the fault suite's) need none
	if ec.client != nil {
		var err error
		if tlsCfg, err = ec.client.ClientConfig(); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: clientURLs, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i, ep := range clientURLs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	t.Fatal("no etcd member says it leads")
	return -1
}
