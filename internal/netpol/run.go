package netpol

import (
	"context"
	"log/slog"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// User is the identity `mizzen server` gives its agent's policy enforcement, bound to
// the ClusterRole of the same name (read pods, namespaces and NetworkPolicies).
const User = "system:mizzen-network-policy"

// Options configure a node's policy enforcement.
type Options struct {
	Client   kubernetes.Interface
	NodeName string
	Table    Table
	// Resync is how often the table is rewritten even without a change (30 s when
	// zero): something else may have removed it.
	Resync time.Duration
	Log    *slog.Logger
}

// Run keeps the node's table in step with the pods, namespaces and NetworkPolicies
// until ctx ends. The table is written whole at start and at every resync; in between,
// changes arriving together are written in one batch that touches only the pods whose
// rules changed (Update), and nothing is written when nothing changed.
func Run(ctx context.Context, opts Options) error {
	if opts.Resync == 0 {
		opts.Resync = 30 * time.Second
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "netpol")
	factory := informers.NewSharedInformerFactory(opts.Client, 0)
	pods := factory.Core().V1().Pods()
	namespaces := factory.Core().V1().Namespaces()
	policies := factory.Networking().V1().NetworkPolicies()
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: func(any) { poke() }, UpdateFunc: func(_, _ any) { poke() }, DeleteFunc: func(any) { poke() }}
	for _, inf := range []cache.SharedIndexInformer{pods.Informer(), namespaces.Informer(), policies.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced, namespaces.Informer().HasSynced, policies.Informer().HasSynced) {
		return ctx.Err()
	}
	ticker := time.NewTicker(opts.Resync)
	defer ticker.Stop()
	var last *Ruleset
	for {
		in := Input{NodeName: opts.NodeName}
		var err error
		if in.Pods, err = pods.Lister().List(labels.Everything()); err == nil {
			in.Namespaces, _ = namespaces.Lister().List(labels.Everything())
			in.Policies, _ = policies.Lister().List(labels.Everything())
			rs := Compile(in)
			var err error
			switch {
			case last == nil:
				err = opts.Table.Apply(rs)
			case !reflect.DeepEqual(*last, rs):
				err = opts.Table.Update(*last, rs)
			}
			if err != nil {
				log.Error("writing the network policy table", "err", err)
				last = nil // rewrite it whole next time
			} else {
				last = &rs
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-ticker.C:
			last = nil // rewrite: someone may have removed the table
		}
	}
}
