package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/scheduler/config"
)

// TestLeaderElection runs two replicas against one (fake) apiserver: exactly one holds
// the kube-system/kube-scheduler Lease, and pods get scheduled.
func TestLeaderElection(t *testing.T) {
	client := fake.NewClientset(node("n1", 4000, 4096))
	addBindingReactor(client)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for _, id := range []string{"replica-a", "replica-b"} {
		cfg := &config.Configuration{}
		config.SetDefaults(cfg)
		cfg.LeaderElection.LeaseDuration.Duration = 2 * time.Second
		cfg.LeaderElection.RenewDeadline.Duration = time.Second
		cfg.LeaderElection.RetryPeriod.Duration = 100 * time.Millisecond
		go func() {
			done <- runWithClient(ctx, clientSet{main: client, events: client, leaderElection: client}, cfg, Options{Identity: id, MetricsAddr: "0"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
	}
	t.Cleanup(func() {
		cancel()
		for i := 0; i < 2; i++ {
			if err := <-done; err != nil {
				t.Errorf("replica returned %v", err)
			}
		}
	})
	env := &testEnv{t: t, client: client}
	var holder string
	if err := pollUntil(func() (bool, error) {
		lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-scheduler", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *lease.Spec.HolderIdentity
		return true, nil
	}); err != nil {
		t.Fatalf("no replica took the lease: %v", err)
	}
	if holder != "replica-a" && holder != "replica-b" {
		t.Fatalf("lease held by %q", holder)
	}
	env.createPod(pod("p", 100, 0))
	if n := env.waitScheduled("default", "p"); n != "n1" {
		t.Errorf("placed on %q", n)
	}
}
