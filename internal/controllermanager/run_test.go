package controllermanager

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"mizzen/internal/apiserver/authz/rbac/bootstrappolicy"
)

func TestEnabledControllers(t *testing.T) {
	all := []Descriptor{{Name: "endpoints"}, {Name: "namespace"}, {Name: "bootstrapsigner", DisabledByDefault: true},
		{Name: "garbage-collector-controller", Aliases: []string{"garbagecollector"}}}
	tests := []struct {
		flags   []string
		want    []string
		wantErr bool
	}{
		{flags: nil, want: []string{"endpoints", "namespace", "garbage-collector-controller"}},
		{flags: []string{"*"}, want: []string{"endpoints", "namespace", "garbage-collector-controller"}},
		{flags: []string{"*", "-namespace"}, want: []string{"endpoints", "garbage-collector-controller"}},
		{flags: []string{"-namespace", "*"}, want: []string{"endpoints", "garbage-collector-controller"}},
		{flags: []string{"*", "bootstrapsigner"}, want: []string{"endpoints", "namespace", "bootstrapsigner", "garbage-collector-controller"}},
		{flags: []string{"*", "-garbagecollector"}, want: []string{"endpoints", "namespace"}},
		{flags: []string{"garbagecollector"}, want: []string{"garbage-collector-controller"}},
		{flags: []string{"garbage-collector-controller"}, want: []string{"garbage-collector-controller"}},
		{flags: []string{"namespace"}, want: []string{"namespace"}},
		{flags: []string{"bootstrapsigner"}, want: []string{"bootstrapsigner"}},
		{flags: []string{"-endpoints"}, want: nil},
		{flags: []string{"*", "nosuch"}, wantErr: true},
		{flags: []string{"-nosuch"}, wantErr: true},
	}
	for _, tt := range tests {
		got, err := enabledControllers(all, tt.flags)
		if (err != nil) != tt.wantErr {
			t.Errorf("--controllers=%v: err = %v, want error %v", tt.flags, err, tt.wantErr)
			continue
		}
		var names []string
		for _, d := range got {
			names = append(names, d.Name)
		}
		if !slices.Equal(names, tt.want) {
			t.Errorf("--controllers=%v started %v, want %v", tt.flags, names, tt.want)
		}
	}
}

func TestControllerNamesAreUniqueAndUpstream(t *testing.T) {
	// Upstream's canonical names, and the older names it still accepts.
	want := []string{"endpoints-controller", "endpointslice-controller", "garbage-collector-controller", "namespace-controller",
		"node-lifecycle-controller", "taint-eviction-controller", "node-ipam-controller", "serviceaccount-controller", "root-ca-certificate-publisher-controller",
		"resourcequota-controller", "pod-garbage-collector-controller", "deployment-controller", "replicaset-controller",
		"replicationcontroller-controller", "daemonset-controller", "statefulset-controller", "job-controller",
		"cronjob-controller", "ttl-after-finished-controller", "disruption-controller", "clusterrole-aggregation-controller",
		"clusterrole-aggregation", "endpoint", "endpointslice", "garbagecollector", "namespace", "nodelifecycle", "nodeipam", "serviceaccount",
		"root-ca-cert-publisher", "resourcequota", "podgc", "deployment", "replicaset", "replicationcontroller",
		"daemonset", "statefulset", "job", "cronjob", "ttl-after-finished", "disruption",
		"persistentvolume-binder-controller", "persistentvolume-binder", "persistentvolume-protection-controller", "pv-protection",
		"persistentvolumeclaim-protection-controller", "pvc-protection", "ephemeral-volume-controller", "ephemeral-volume",
		"persistentvolume-expander-controller", "persistentvolume-expander", "service-cidr-controller",
		"endpointslice-mirroring-controller", "endpointslicemirroring"}
	seen := map[string]bool{}
	for _, d := range append(append(infraControllers(), workloadControllers()...), storageControllers()...) {
		for _, name := range append([]string{d.Name}, d.Aliases...) {
			if seen[name] {
				t.Errorf("controller name %q used twice", name)
			}
			seen[name] = true
		}
		if d.Start == nil {
			t.Errorf("controller %q has no Start", d.Name)
		}
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("controller %q missing", name)
		}
	}
}

// Two replicas share one apiserver: only the Lease holder starts controllers, and when
// it stops the other takes over.
func TestLeaderElectionRunsOneReplica(t *testing.T) {
	client := fake.NewClientset()
	var starts [2]atomic.Int32
	ctxs := [2]context.Context{}
	cancels := [2]context.CancelFunc{}
	done := [2]chan error{make(chan error, 1), make(chan error, 1)}
	for i := range 2 {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
		counter := &starts[i]
		descs := []Descriptor{{Name: "probe", Start: func(ctx context.Context, cc *ControllerContext) error {
			counter.Add(1)
			return nil
		}}}
		opts := RunOptions{
			LeaderElect: true, Identity: []string{"replica-a", "replica-b"}[i],
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		}
		go func() { done[i] <- run(ctxs[i], client, nil, descs, opts) }()
	}

	var leader int
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for i := range 2 {
			if starts[i].Load() > 0 {
				leader = i
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("no replica became leader")
	}
	lease, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-controller-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease: %v", err)
	}
	wantHolder := []string{"replica-a", "replica-b"}[leader]
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != wantHolder {
		t.Fatalf("lease holder = %v, want %s", lease.Spec.HolderIdentity, wantHolder)
	}
	follower := 1 - leader
	// Let the follower retry many times; it must keep waiting while the lease is renewed.
	time.Sleep(500 * time.Millisecond)
	if n := starts[follower].Load(); n != 0 {
		t.Fatalf("follower started controllers %d times while the leader held the lease", n)
	}

	cancels[leader]()
	if err := <-done[leader]; err != nil {
		t.Fatalf("leader returned %v after its context ended", err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return starts[follower].Load() == 1, nil
	})
	if err != nil {
		t.Fatal("the second replica did not take over after the leader stopped")
	}
}

func TestWithoutLeaderElectionControllersStartAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Bool
	descs := []Descriptor{{Name: "probe", Start: func(ctx context.Context, cc *ControllerContext) error {
		started.Store(cc.Informers != nil && cc.Client != nil)
		return nil
	}}}
	done := make(chan error, 1)
	go func() { done <- run(ctx, fake.NewClientset(), nil, descs, RunOptions{}) }()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return started.Load(), nil
	}); err != nil {
		t.Fatal("controller not started with a client and informers")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

// Every controller names the ServiceAccount it works as under
// --use-service-account-credentials, and the default policy binds that account to a
// role of its own.
func TestEveryControllerHasABoundAccount(t *testing.T) {
	bound := map[string]bool{}
	for _, b := range bootstrappolicy.ControllerClusterRoleBindings() {
		bound[b.Subjects[0].Name] = true
	}
	for _, item := range bootstrappolicy.Items() {
		if b, ok := item.Desired.(*rbacv1.RoleBinding); ok && strings.HasPrefix(b.Name, bootstrappolicy.ControllerRolePrefix) {
			bound[b.Subjects[0].Name] = true
		}
	}
	for _, d := range append(append(append(infraControllers(), workloadControllers()...), storageControllers()...), certificateControllers()...) {
		if d.Account == "" {
			t.Errorf("controller %q names no ServiceAccount", d.Name)
		} else if !bound[d.Account] {
			t.Errorf("controller %q works as %q, which no system:controller:* role is bound to", d.Name, d.Account)
		}
	}
}
