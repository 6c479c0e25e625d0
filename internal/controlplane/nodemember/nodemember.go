// Package nodemember removes a server's etcd member from the cluster of servers when
// the server's Node is deleted (`kubectl delete node`), as k3s does: each server marks
// its own Node with its member's name and a finalizer, and the server holding the
// Lease kube-system/mizzen-etcd-member-removal removes the member of a Node being
// deleted, then lets the deletion finish.
package nodemember

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// What a server's Node carries, and the Lease electing the server that removes members.
const (
	// MemberAnnotation names the etcd member of the server running on the Node.
	MemberAnnotation = "etcd.mizzen.io/member-name"
	// Finalizer holds a server's Node until its etcd member is removed.
	Finalizer      = "etcd.mizzen.io/member"
	LeaseNamespace = "kube-system"
	LeaseName      = "mizzen-etcd-member-removal"
)

// Members is the cluster of servers' etcd membership.
type Members interface {
	// Names are the members' names.
	Names(ctx context.Context) ([]string, error)
	// Remove removes the named member.
	Remove(ctx context.Context, name string) error
}

// Mark keeps this server's Node (once its kubelet has registered it) annotated with
// the server's etcd member and holding the finalizer, checking again every interval
// until ctx ends: a Node deleted and registered again is marked again.
func Mark(ctx context.Context, client kubernetes.Interface, nodeName, member string, interval time.Duration, log *slog.Logger) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := mark(ctx, client, nodeName, member); err != nil && !apierrors.IsNotFound(err) {
			log.Warn("marking this server's node with its etcd member", "node", nodeName, "err", err)
		}
	}, interval)
}

func mark(ctx context.Context, client kubernetes.Interface, nodeName, member string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if node.DeletionTimestamp != nil || (node.Annotations[MemberAnnotation] == member && slices.Contains(node.Finalizers, Finalizer)) {
		return nil
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[MemberAnnotation] = member
	if !slices.Contains(node.Finalizers, Finalizer) {
		node.Finalizers = append(node.Finalizers, Finalizer)
	}
	_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	return err
}

// Remover removes the etcd members of Nodes being deleted.
type Remover struct {
	Client  kubernetes.Interface
	Members Members
	// Own is this server's member, which it does not remove: a server removing its
	// own member would cut itself off before it could finish the Node's deletion.
	Own      string
	Recorder record.EventRecorder
	Log      *slog.Logger
}

// Sync handles one Node: when it is being deleted and holds the finalizer, its
// member (if still in the cluster) is removed and then the finalizer.
func (r *Remover) Sync(ctx context.Context, node *corev1.Node) error {
	if node.DeletionTimestamp == nil || !slices.Contains(node.Finalizers, Finalizer) {
		return nil
	}
	member := node.Annotations[MemberAnnotation]
	if member == r.Own {
		r.Recorder.Eventf(node, corev1.EventTypeWarning, "EtcdMemberNotRemoved",
			"etcd member %s is that of the server removing members: stop that server, and another server removes it", member)
		return nil
	}
	if member != "" {
		names, err := r.Members.Names(ctx)
		if err != nil {
			return err
		}
		if slices.Contains(names, member) {
			if err := r.Members.Remove(ctx, member); err != nil {
				r.Recorder.Eventf(node, corev1.EventTypeWarning, "EtcdMemberNotRemoved", "removing etcd member %s: %v", member, err)
				return err
			}
			r.Log.Info("removed the etcd member of a deleted node", "node", node.Name, "member", member)
			r.Recorder.Eventf(node, corev1.EventTypeNormal, "EtcdMemberRemoved", "Removed etcd member %s from the cluster", member)
		}
	}
	node = node.DeepCopy()
	node.Finalizers = slices.DeleteFunc(node.Finalizers, func(f string) bool { return f == Finalizer })
	_, err := r.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Run removes members while this server holds the Lease, standing for it again
// whenever it loses it, until ctx ends.
func Run(ctx context.Context, client kubernetes.Interface, members Members, own string, log *slog.Logger) error {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	r := &Remover{Client: client, Members: members, Own: own, Log: log,
		Recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "etcd-member-removal"})}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: LeaseNamespace, Name: LeaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: own + "_" + string(uuid.NewUUID())},
	}
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			ReleaseOnCancel: true, Name: LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: r.run,
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		elector.Run(ctx)
	}
	return nil
}

// run syncs every Node that changes, retrying failures with backoff, until ctx ends.
func (r *Remover) run(ctx context.Context) {
	r.Log.Info("removing the etcd members of deleted server nodes", "lease", LeaseNamespace+"/"+LeaseName)
	factory := informers.NewSharedInformerFactory(r.Client, 0)
	nodes := factory.Core().V1().Nodes()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if node, ok := obj.(*corev1.Node); ok && node.DeletionTimestamp != nil {
			queue.Add(node.Name)
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		r.Log.Warn("watching nodes", "err", err)
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		name, shutdown := queue.Get()
		if shutdown {
			return
		}
		node, err := nodes.Lister().Get(name)
		if err == nil {
			err = r.Sync(ctx, node)
		} else if apierrors.IsNotFound(err) {
			err = nil
		}
		if err != nil && ctx.Err() == nil {
			r.Log.Warn("removing the etcd member of a deleted node", "node", name, "err", err)
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}
