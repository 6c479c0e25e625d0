package persistentvolume

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// binderWorld is one scenario: a fake clientset, caches refreshed from it after every
// command (as informers would be), and the recorder the events go to.
type binderWorld struct {
	client         *fake.Clientset
	pvcs, pvs, scs cache.Indexer
	recorder       *record.FakeRecorder
	c              *Controller
	ctx            context.Context
	seenActions    int
}

func newBinderWorld(ctx context.Context) *binderWorld {
	idx := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	w := &binderWorld{client: fake.NewClientset(), pvcs: idx(), pvs: idx(), scs: idx(), recorder: record.NewFakeRecorder(100), ctx: ctx}
	w.c = newController(w.client, corelisters.NewPersistentVolumeClaimLister(w.pvcs), corelisters.NewPersistentVolumeLister(w.pvs),
		storagelisters.NewStorageClassLister(w.scs), w.recorder)
	return w
}

// refresh replaces the caches with what the fake apiserver holds.
func (w *binderWorld) refresh(t *testing.T) {
	pvcs, _ := w.client.CoreV1().PersistentVolumeClaims("").List(w.ctx, metav1.ListOptions{})
	pvs, _ := w.client.CoreV1().PersistentVolumes().List(w.ctx, metav1.ListOptions{})
	scs, _ := w.client.StorageV1().StorageClasses().List(w.ctx, metav1.ListOptions{})
	var a, b, c []any
	for i := range pvcs.Items {
		a = append(a, &pvcs.Items[i])
	}
	for i := range pvs.Items {
		b = append(b, &pvs.Items[i])
	}
	for i := range scs.Items {
		c = append(c, &scs.Items[i])
	}
	for _, r := range []struct {
		idx   cache.Indexer
		items []any
	}{{w.pvcs, a}, {w.pvs, b}, {w.scs, c}} {
		if err := r.idx.Replace(r.items, ""); err != nil {
			t.Fatal(err)
		}
	}
	w.seenActions = len(w.client.Actions())
}

func (w *binderWorld) apply(t *testing.T, input string) {
	for _, doc := range strings.Split(input, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decoding %q: %v", doc, err)
		}
		meta := obj.(metav1.Object)
		if meta.GetUID() == "" {
			meta.SetUID(types.UID("uid-" + meta.GetName()))
		}
		var createErr error
		switch o := obj.(type) {
		case *v1.PersistentVolumeClaim:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			if o.Status.Phase == "" {
				o.Status.Phase = v1.ClaimPending
			}
			_ = w.client.CoreV1().PersistentVolumeClaims(o.Namespace).Delete(w.ctx, o.Name, metav1.DeleteOptions{})
			_, createErr = w.client.CoreV1().PersistentVolumeClaims(o.Namespace).Create(w.ctx, o, metav1.CreateOptions{})
		case *v1.PersistentVolume:
			_ = w.client.CoreV1().PersistentVolumes().Delete(w.ctx, o.Name, metav1.DeleteOptions{})
			_, createErr = w.client.CoreV1().PersistentVolumes().Create(w.ctx, o, metav1.CreateOptions{})
		case *storagev1.StorageClass:
			_, createErr = w.client.StorageV1().StorageClasses().Create(w.ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected object %T", obj)
		}
		if createErr != nil {
			t.Fatal(createErr)
		}
	}
	w.refresh(t)
}

// writes describes the API writes made since the last refresh, then the events.
func (w *binderWorld) writes() string {
	var out strings.Builder
	for _, a := range w.client.Actions()[w.seenActions:] {
		var obj runtime.Object
		switch a := a.(type) {
		case clienttesting.UpdateAction:
			obj = a.GetObject()
		case clienttesting.CreateAction:
			obj = a.GetObject()
		case clienttesting.DeleteAction:
			fmt.Fprintf(&out, "delete %s %s\n", a.GetResource().Resource, a.GetName())
			continue
		default:
			continue
		}
		verb := a.GetVerb()
		if a.GetSubresource() != "" {
			verb += "-" + a.GetSubresource()
		}
		fmt.Fprintf(&out, "%s %s\n", verb, describe(obj))
	}
	for {
		select {
		case e := <-w.recorder.Events:
			fmt.Fprintf(&out, "event: %s\n", e)
			continue
		default:
		}
		break
	}
	if out.Len() == 0 {
		return "(no writes)\n"
	}
	return out.String()
}

func annotationKeys(m map[string]string) string {
	var keys []string
	for k, v := range m {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	if len(keys) == 0 {
		return ""
	}
	return " ann=" + strings.Join(keys, ",")
}

func describe(obj runtime.Object) string {
	switch o := obj.(type) {
	case *v1.PersistentVolume:
		ref := "<none>"
		if r := o.Spec.ClaimRef; r != nil {
			ref = r.Namespace + "/" + r.Name
			if r.UID != "" {
				ref += "@" + string(r.UID)
			}
		}
		s := fmt.Sprintf("pv/%s phase=%s claimRef=%s%s", o.Name, o.Status.Phase, ref, annotationKeys(o.Annotations))
		if o.Status.Message != "" {
			s += fmt.Sprintf(" message=%q", o.Status.Message)
		}
		return s
	case *v1.PersistentVolumeClaim:
		capacity := o.Status.Capacity[v1.ResourceStorage]
		return fmt.Sprintf("pvc/%s/%s phase=%s volume=%s class=%s capacity=%s modes=%v%s", o.Namespace, o.Name, o.Status.Phase,
			o.Spec.VolumeName, ptrString(o.Spec.StorageClassName), capacity.String(), o.Status.AccessModes, annotationKeys(o.Annotations))
	}
	return fmt.Sprintf("%T", obj)
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestBinderScenarios replays testdata/*.txt. Commands:
//
//	apply                 YAML objects (PVs, PVCs, StorageClasses, separated by ---) created or replaced
//	delete pvc=NS/NAME    deletes a claim
//	sync claim=NS/NAME    one claim sync; prints the writes and events it made
//	sync volume=NAME      one volume sync; likewise
//	get                   prints every claim and volume
func TestBinderScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		ctx := t.Context()
		w := newBinderWorld(ctx)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "apply":
				w.apply(t, d.Input)
				return ""
			case "delete":
				var key string
				d.ScanArgs(t, "pvc", &key)
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				if err := w.client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				w.refresh(t)
				return ""
			case "sync":
				var err error
				switch {
				case d.HasArg("claim"):
					var key string
					d.ScanArgs(t, "claim", &key)
					err = w.c.syncClaimKey(ctx, key)
				case d.HasArg("volume"):
					var name string
					d.ScanArgs(t, "volume", &name)
					err = w.c.syncVolumeKey(ctx, name)
				}
				out := w.writes()
				if err != nil {
					out += "error: " + err.Error() + "\n"
				}
				w.refresh(t)
				return out
			case "get":
				var out strings.Builder
				pvcs, _ := w.client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
				for i := range pvcs.Items {
					fmt.Fprintln(&out, describe(&pvcs.Items[i]))
				}
				pvs, _ := w.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
				for i := range pvs.Items {
					fmt.Fprintln(&out, describe(&pvs.Items[i]))
				}
				w.seenActions = len(w.client.Actions())
				return out.String()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}
