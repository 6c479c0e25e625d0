package controllermanager_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"mizzen/internal/controllermanager"
	"mizzen/internal/controlplane/core"
	"mizzen/internal/testing/apiserver"
)

// eventually polls cond until it holds, failing the test with what after 30s.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			t.Logf("%s: %v", what, err)
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out waiting until %s", what)
	}
}

// startManager runs the controller-manager with the given controllers against the
// test apiserver until the test ends.
func startManager(t *testing.T, cfg *rest.Config, nodeGrace time.Duration, controllers ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controllermanager.Run(ctx, cfg, controllermanager.RunOptions{
			Options: controllermanager.Options{
				ConcurrentSyncs: 2, NodeMonitorGracePeriod: nodeGrace,
				ClusterCIDR: "10.244.0.0/16", NodeCIDRMaskSize: 24, TerminatedPodGCThreshold: 100,
			},
			Controllers:                  controllers,
			UseServiceAccountCredentials: true,
			LeaderElect:                  true, Identity: "integration",
			LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// managerConfig is the controller-manager's own identity, as `mizzen server` gives it:
// under RBAC, the tests then prove the default policy lets its controllers work.
func managerConfig(t *testing.T, srv *apiserver.Server) *rest.Config {
	t.Helper()
	cfg, err := srv.ComponentConfig("controller-manager", "system:kube-controller-manager", nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// requireServed skips the test unless the apiserver serves every named resource
// ("v1/namespaces", "apps/v1/deployments").
func requireServed(t *testing.T, cfg *rest.Config, resources ...string) {
	t.Helper()
	disc := discovery.NewDiscoveryClientForConfigOrDie(cfg)
	_, lists, err := disc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	served := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			served[l.GroupVersion+"/"+r.Name] = true
		}
	}
	var missing []string
	for _, r := range resources {
		if !served[r] {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		t.Skipf("the apiserver does not serve %v yet", missing)
	}
}

// The garbage collector against a real apiserver: owners and dependents are RBAC
// Roles, which any apiserver build serves and which carry no other controller.
func TestGarbageCollectorAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	srv := apiserver.StartServer(t)
	cfg := srv.AdminConfig
	requireServed(t, cfg, "rbac.authorization.k8s.io/v1/roles", "coordination.k8s.io/v1/leases")
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	startManager(t, managerConfig(t, srv), 40*time.Second, "garbage-collector")

	eventually(t, "the lease names this manager", func(ctx context.Context) (bool, error) {
		l, err := client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "integration", err
	})
	roles := client.RbacV1().Roles("default")
	newPair := func(t *testing.T, block bool) (owner, dep *rbacv1.Role) {
		owner, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{GenerateName: "owner-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep, err = roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{GenerateName: "dependent-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role",
				Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: &block}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return owner, dep
	}
	gone := func(ctx context.Context, name string) bool {
		_, err := roles.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}

	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy)+" deletion takes the dependent along", func(t *testing.T) {
			owner, dep := newPair(t, true)
			if err := roles.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "owner and dependent are gone", func(ctx context.Context) (bool, error) {
				return gone(ctx, owner.Name) && gone(ctx, dep.Name), nil
			})
		})
	}

	t.Run("orphan deletion keeps the dependent without its owner reference", func(t *testing.T) {
		owner, dep := newPair(t, false)
		orphan := metav1.DeletePropagationOrphan
		if err := roles.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the owner is gone and the dependent has no owner", func(ctx context.Context) (bool, error) {
			d, err := roles.Get(ctx, dep.Name, metav1.GetOptions{})
			return gone(ctx, owner.Name) && err == nil && len(d.OwnerReferences) == 0, err
		})
	})

	t.Run("an object created with an owner that never existed is collected", func(t *testing.T) {
		dep, err := roles.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{GenerateName: "stray-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role",
				Name: "phantom", UID: "00000000-0000-0000-0000-000000000001"}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the stray role is gone", func(ctx context.Context) (bool, error) { return gone(ctx, dep.Name), nil })
	})
}

// The controller-manager against a real apiserver on etcd: one story per controller,
// each told from the point of view of a user of the API.
func TestCoreControllersAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an apiserver")
	}
	// The stories' pods carry no tolerations of their own (DefaultTolerationSeconds would
	// give them five minutes on an unreachable node), and their claims no protection
	// finalizers, which only the PV controllers this test does not run would lift.
	srv := apiserver.StartWithOptions(t, func(o *core.Options) {
		o.DisableAdmissionPlugins = append(o.DisableAdmissionPlugins, "DefaultTolerationSeconds", "StorageObjectInUseProtection")
	})
	cfg := srv.AdminConfig
	requireServed(t, cfg, "v1/namespaces", "v1/serviceaccounts", "v1/configmaps", "v1/secrets", "v1/endpoints",
		"v1/nodes", "v1/resourcequotas", "v1/persistentvolumeclaims", "v1/pods", "v1/services")
	client := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "story"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the manager starts, a pod is bound to a node that does not exist; pod GC's
	// first pass, right after start, finds it.
	ghost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-a-ghost-node"},
		Spec: corev1.PodSpec{NodeName: "ghost", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := client.CoreV1().Pods("story").Create(ctx, ghost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A short grace period lets the node story run in seconds.
	startManager(t, managerConfig(t, srv), 2*time.Second)

	t.Run("a pod bound to a node that does not exist is removed", func(t *testing.T) {
		eventually(t, "pod story/on-a-ghost-node is gone", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Pods("story").Get(ctx, "on-a-ghost-node", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	t.Run("a new namespace gets a default service account and the root CA", func(t *testing.T) {
		eventually(t, "serviceaccount story/default exists", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts("story").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, err
		})
		if err := client.CoreV1().ServiceAccounts("story").Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deleted default service account is back", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts("story").Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})

		eventually(t, "configmap story/kube-root-ca.crt holds the CA", func(ctx context.Context) (bool, error) {
			cm, err := client.CoreV1().ConfigMaps("story").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			return err == nil && cm.Data["ca.crt"] == string(cfg.CAData), err
		})
		// managedFields name the writer as upstream's: "kube-controller-manager".
		cm, err := client.CoreV1().ConfigMaps("story").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.ManagedFields) == 0 || cm.ManagedFields[0].Manager != "kube-controller-manager" {
			t.Errorf("managedFields of kube-root-ca.crt: %+v, want the manager kube-controller-manager", cm.ManagedFields)
		}
	})

	t.Run("a service's ready pod shows up in its endpoints and endpoint slice", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}},
		}
		created, err := client.CoreV1().Pods("story").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = corev1.PodRunning
		created.Status.PodIP = "10.244.1.5"
		created.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.5"}}
		created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := client.CoreV1().Pods("story").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
		}
		if _, err := client.CoreV1().Services("story").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "endpoints story/web list 10.244.1.5:8080 as ready", func(ctx context.Context) (bool, error) {
			ep, err := client.CoreV1().Endpoints("story").Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(ep.Subsets) == 1 && len(ep.Subsets[0].Addresses) == 1 && ep.Subsets[0].Addresses[0].IP == "10.244.1.5" &&
				ep.Subsets[0].Ports[0].Port == 8080, nil
		})
		eventually(t, "one endpoint slice for web holds the ready pod", func(ctx context.Context) (bool, error) {
			slices, err := client.DiscoveryV1().EndpointSlices("story").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
			if err != nil {
				return false, err
			}
			if len(slices.Items) != 1 || len(slices.Items[0].Endpoints) != 1 {
				return false, nil
			}
			e := slices.Items[0].Endpoints[0]
			return e.Addresses[0] == "10.244.1.5" && *e.Conditions.Ready && slices.Items[0].Labels[discoveryv1.LabelManagedBy] == "endpointslice-controller.k8s.io", nil
		})
	})

	t.Run("a quota counts what the namespace holds", func(t *testing.T) {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "quota"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceServices: resource.MustParse("5")}}}
		if _, err := client.CoreV1().ResourceQuotas("story").Create(ctx, q, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "quota status shows 1 pod and 1 service used", func(ctx context.Context) (bool, error) {
			got, err := client.CoreV1().ResourceQuotas("story").Get(ctx, "quota", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			pods, services := got.Status.Used[corev1.ResourcePods], got.Status.Used[corev1.ResourceServices]
			return len(got.Status.Hard) == 2 && pods.Value() == 1 && services.Value() == 1, nil
		})
	})

	t.Run("a new node gets a pod CIDR", func(t *testing.T) {
		if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "node-a has a /24 out of 10.244.0.0/16", func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
			return err == nil && n.Spec.PodCIDR == "10.244.0.0/24" && len(n.Spec.PodCIDRs) == 1, err
		})
	})

	t.Run("a node whose kubelet falls silent becomes Unknown and its pods are evicted", func(t *testing.T) {
		for _, name := range []string{"kube-node-lease"} {
			_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		// node-a's kubelet keeps beating throughout: with no Ready node left at all, the
		// controller would suspect its own connectivity and evict nothing, as upstream.
		stop := keepNodeHealthy(t, client, "node-a")
		defer stop()
		node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		heartbeat(t, client, node.Name)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stranded"},
			Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := client.CoreV1().Pods("story").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "node-b is Ready=Unknown with the unreachable taints", func(ctx context.Context) (bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			unknown := false
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown && c.Reason == "NodeStatusUnknown" {
					unknown = true
				}
			}
			taints := 0
			for _, taint := range n.Spec.Taints {
				if taint.Key == corev1.TaintNodeUnreachable {
					taints++
				}
			}
			return unknown && taints == 2, nil
		})
		eventually(t, "the pod without a toleration is being deleted", func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods("story").Get(ctx, "stranded", metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && p.DeletionTimestamp != nil), nil
		})
		eventually(t, "kubectl describe would show why", func(ctx context.Context) (bool, error) {
			nodeEvents, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=node-b"})
			if err != nil {
				return false, err
			}
			podEvents, err := client.CoreV1().Events("story").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=stranded"})
			if err != nil {
				return false, err
			}
			reasons := map[string]string{}
			for _, e := range append(nodeEvents.Items, podEvents.Items...) {
				reasons[e.Reason] = e.Message
			}
			return reasons["RegisteredNode"] == "Registered Node node-b in Controller" &&
				reasons["NodeNotReady"] != "" && reasons["TaintManagerEviction"] == "Marking for deletion Pod story/stranded", nil
		})
		// No kubelet will ever confirm the pod's end: finish it as an operator would.
		err = client.CoreV1().Pods("story").Delete(ctx, "stranded", *metav1.NewDeleteOptions(0))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	})

	t.Run("a deleted namespace is emptied of every kind and goes away", func(t *testing.T) {
		// Beside what the stories above left (pods, services, endpoints, slices, quota,
		// service account, root CA), a few more kinds.
		for _, create := range []func() error{
			func() error {
				_, err := client.CoreV1().Secrets("story").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := client.RbacV1().Roles("story").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"}}, metav1.CreateOptions{})
				return err
			},
			func() error {
				_, err := client.CoordinationV1().Leases("story").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{})
				return err
			},
		} {
			if err := create(); err != nil {
				t.Fatal(err)
			}
		}
		if before := namespaceContent(t, cfg, "story"); !slices.Contains(before, "secrets/s") || !slices.Contains(before, "leases/l") {
			t.Fatalf("namespace content %v lacks what the test created", before)
		}
		if err := client.CoreV1().Namespaces().Delete(ctx, "story", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the namespace's content is gone", func(ctx context.Context) (bool, error) {
			ns, err := client.CoreV1().Namespaces().Get(ctx, "story", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			for _, c := range ns.Status.Conditions {
				if c.Type == corev1.NamespaceContentRemaining && c.Reason == "ContentRemoved" {
					return true, nil
				}
			}
			return false, nil
		})
		if left := namespaceContent(t, cfg, "story"); len(left) > 0 {
			t.Errorf("left in the namespace: %v", left)
		}
		eventually(t, "namespace story is gone", func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Namespaces().Get(ctx, "story", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// namespaceContent lists every namespaced resource the apiserver serves in namespace,
// as kubectl api-resources would find them, and names what is there.
func namespaceContent(t *testing.T, cfg *rest.Config, namespace string) []string {
	t.Helper()
	_, lists, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	meta := metadata.NewForConfigOrDie(cfg)
	var out []string
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			if !r.Namespaced || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			items, err := meta.Resource(gv.WithResource(r.Name)).Namespace(namespace).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Errorf("list %s: %v", r.Name, err)
				continue
			}
			for _, item := range items.Items {
				out = append(out, r.Name+"/"+item.Name)
			}
		}
	}
	return out
}

// heartbeat reports the node Ready and renews its Lease, as its kubelet would.
func heartbeat(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	ctx := context.Background()
	// Node IPAM may be writing the node meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	renew := metav1.NewMicroTime(time.Now())
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, RenewTime: &renew}}, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		lease.Spec.RenewTime = &renew
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// keepNodeHealthy beats for the node every half second until the returned stop is
// called.
func keepNodeHealthy(t *testing.T, client kubernetes.Interface, name string) (stop func()) {
	t.Helper()
	heartbeat(t, client, name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(500 * time.Millisecond)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				renew := metav1.NewMicroTime(time.Now())
				patch := fmt.Sprintf(`{"spec":{"renewTime":%q}}`, renew.Format(metav1.RFC3339Micro))
				if _, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil && ctx.Err() == nil {
					t.Logf("renew lease %s: %v", name, err)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}
