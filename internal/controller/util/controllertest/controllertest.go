// Package controllertest has helpers for controller unit tests that run against
// client-go's fake clientset: name generation (the fake tracker ignores generateName)
// and starting informers.
package controllertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// GenerateNames makes the fake clientset fill in metadata.name from generateName with
// a counter (name-1, name-2, ...) and give every created object a UID, as the
// apiserver would.
func GenerateNames(client *fake.Clientset) {
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create, ok := action.(clienttesting.CreateAction)
		if !ok {
			return false, nil, nil
		}
		obj, ok := create.GetObject().(metav1.Object)
		if !ok {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		if obj.GetName() == "" && obj.GetGenerateName() != "" {
			obj.SetName(fmt.Sprintf("%s%d", obj.GetGenerateName(), n))
		}
		if obj.GetUID() == "" {
			obj.SetUID(types.UID(fmt.Sprintf("uid-%s-%d", obj.GetName(), n)))
		}
		return false, nil, nil
	})
}

// StartInformers starts factory and waits until its informers have synced.
func StartInformers(t *testing.T, ctx context.Context, factory informers.SharedInformerFactory) {
	t.Helper()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
}

// Eventually polls cond every 10ms until it returns true or 30s pass.
func Eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Writes returns the create/update/patch/delete actions recorded by client, as
// "verb resource[/subresource] namespace/name" lines, for stories in tests.
func Writes(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		verb := a.GetVerb()
		if verb == "get" || verb == "list" || verb == "watch" {
			continue
		}
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		name := ""
		switch x := a.(type) {
		case clienttesting.CreateAction:
			if m, ok := x.GetObject().(metav1.Object); ok {
				name = m.GetName()
			}
		case clienttesting.UpdateAction:
			if m, ok := x.GetObject().(metav1.Object); ok {
				name = m.GetName()
			}
		case clienttesting.PatchAction:
			name = x.GetName()
		case clienttesting.DeleteAction:
			name = x.GetName()
		}
		out = append(out, fmt.Sprintf("%s %s %s/%s", verb, res, a.GetNamespace(), name))
	}
	return out
}

// WaitForCache polls until store holds exactly the objects that list returns (by
// namespace/name and deep equality): the informer has caught up with the fake apiserver.
func WaitForCache(t *testing.T, store interface{ List() []any }, list func() []any) {
	t.Helper()
	key := func(o any) string {
		m := o.(metav1.Object)
		return m.GetNamespace() + "/" + m.GetName()
	}
	Eventually(t, "informer cache to catch up", func() bool {
		want := map[string]any{}
		for _, o := range list() {
			want[key(o)] = o
		}
		got := store.List()
		if len(got) != len(want) {
			return false
		}
		for _, o := range got {
			w, ok := want[key(o)]
			if !ok || !equality.Semantic.DeepEqual(w, o) {
				return false
			}
		}
		return true
	})
}
