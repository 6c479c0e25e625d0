package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/controller/util"
	"mizzen/internal/ticklimit"
)

// The floor (-floor) is what a controller-manager built on client-go cannot go below
// for this load: a process that makes the calls mizzen's controller-manager makes for
// each Deployment, through client-go as it does, with the same watches open, and
// does nothing else: no controller logic, no event correlation, no waiting for its
// own writes to come back through the watch. Per Deployment: the ReplicaSet's
// create, ten pod creates in slow-start batches, two events, one ReplicaSet status
// and two Deployment status writes (mizzen's controller-manager makes 16.2 calls per
// Deployment, upstream's 19.2). Each call goes through a client of the controller
// that makes it, with its own qps limit and the controller-manager's limiter
// (package ticklimit), as in the controller-manager: one client
// for them all was paced by its limit to 14 s and cost 6.0 CPU s, against 3.4 s
// unpaced. Its CPU beside the controller-managers' says how much of theirs is the
// calls themselves.

// floorPlane is mizzen's server (etcd and the apiserver) with the floor client in
// place of a controller-manager.
type floorPlane struct {
	*benchutil.Mizzen
}

func (f *floorPlane) Name() string { return "floor" }

// StartControllerManager starts this benchmark's binary as the floor client.
func (f *floorPlane) StartControllerManager(qps, _ int, _ string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return f.StartAsControllerManager(exec.Command(exe, "-floor-client", f.Kubeconfig, "-kube-api-qps", strconv.Itoa(qps)))
}

// floorWorkers handle Deployments concurrently, as the controller-manager's five
// Deployment and five ReplicaSet workers do.
const floorWorkers = 10

// floorClients are the floor's clientsets, each with its own qps limit as each of the
// controller-manager's controllers has: deployments makes the Deployment controller's
// calls, replicaSets the ReplicaSet controller's, informers the shared informers'.
type floorClients struct {
	deployments, replicaSets, informers kubernetes.Interface
}

// runFloorClient is the floor client's process: it serves Deployments until killed.
func runFloorClient(kubeconfig string, qps int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(qps), 2*qps
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	var clients floorClients
	for _, c := range []*kubernetes.Interface{&clients.deployments, &clients.replicaSets, &clients.informers} {
		// The limiter mizzen's controller-manager gives each controller, which paces
		// calls more cheaply than client-go's own.
		cfg.RateLimiter = ticklimit.New(cfg.QPS, cfg.Burst)
		if *c, err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	client := clients.informers
	ctx := context.Background()
	// Pods need the namespace's default ServiceAccount, which the controller-manager
	// would have made.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(util.TrimManagedFields))
	factory.Core().V1().Pods().Informer()
	factory.Apps().V1().ReplicaSets().Informer()
	queue := make(chan *appsv1.Deployment, 1<<16)
	if _, err := factory.Apps().V1().Deployments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				queue <- d
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	for range floorWorkers {
		go func() {
			for d := range queue {
				if err := floorCalls(ctx, clients, d); err != nil {
					fmt.Fprintln(os.Stderr, d.Name+":", err)
				}
			}
		}()
	}
	select {}
}

// floorCalls makes a Deployment's calls, each through the client of the controller
// that makes it.
func floorCalls(ctx context.Context, clients floorClients, d *appsv1.Deployment) error {
	ns := d.Namespace
	client := clients.deployments
	owner := metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	rs, err := client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-floor", Namespace: ns, Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*owner}},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	replicas := *rs.Spec.Replicas
	d = d.DeepCopy()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, UnavailableReplicas: replicas}
	if d, err = client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := floorEvent(ctx, client, "Deployment", d, "ScalingReplicaSet", "Scaled up replica set "+rs.Name); err != nil {
		return err
	}
	created, err := util.SlowStartBatch(int(replicas), func() error {
		pod := util.PodFromTemplate(&rs.Spec.Template, rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), "", rs.Name+"-")
		_, err := util.CreatePod(ctx, clients.replicaSets, pod)
		return err
	})
	if err != nil {
		return err
	}
	if err := floorEvent(ctx, clients.replicaSets, "ReplicaSet", rs, "SuccessfulCreate", "Created pod"); err != nil {
		return err
	}
	n := int32(created)
	rs.Status = appsv1.ReplicaSetStatus{ObservedGeneration: rs.Generation, Replicas: n, FullyLabeledReplicas: n}
	if _, err := clients.replicaSets.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, rs, metav1.UpdateOptions{}); err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, UnavailableReplicas: n}
	_, err = client.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

// floorEvent writes one Normal event about the object, as an event recorder's sink
// does (client-go's typed create, its answer decoded).
func floorEvent(ctx context.Context, client kubernetes.Interface, kind string, obj metav1.Object, reason, message string) error {
	now := metav1.Now()
	_, err := client.CoreV1().Events(obj.GetNamespace()).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj.GetName(), now.UnixNano()), Namespace: obj.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{Kind: kind, APIVersion: "apps/v1", Namespace: obj.GetNamespace(),
			Name: obj.GetName(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()},
		Reason: reason, Message: message, Type: corev1.EventTypeNormal, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "floor"},
	}, metav1.CreateOptions{})
	return err
}
