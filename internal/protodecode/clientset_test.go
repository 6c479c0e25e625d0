package protodecode

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// servedEvent is one event of a served watch: its type and object.
type servedEvent struct {
	typ watch.EventType
	obj runtime.Object
}

// resourceServer serves one collection in protobuf, as the apiserver does: a list is
// an enveloped list; a watch is a stream of length-prefixed bare WatchEvents whose
// objects are enveloped.
type resourceServer struct {
	t      *testing.T
	gv     schema.GroupVersion
	list   runtime.Object
	events []servedEvent
}

func (s *resourceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		s.t.Errorf("%s asks for %q, want protobuf", r.URL, r.Header.Get("Accept"))
	}
	if r.URL.Query().Get("watch") != "true" {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(encode(s.t, s.list, s.gv))
		return
	}
	w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
	frames := streaming.NewEncoder(protobuf.LengthDelimitedFramer.NewFrameWriter(w), upstreamRawSerializer)
	for _, ev := range s.events {
		gv := s.gv
		if _, ok := ev.obj.(*metav1.Status); ok {
			gv = metav1.SchemeGroupVersion
		}
		raw := encode(s.t, ev.obj, gv)
		if err := frames.Encode(&metav1.WatchEvent{Type: string(ev.typ), Object: runtime.RawExtension{Raw: raw}}); err != nil {
			s.t.Error(err)
			return
		}
		w.(http.Flusher).Flush()
	}
}

// watchAll watches until the server ends the stream and returns every event, each
// kept as it came while the later ones are read.
func watchAll(t *testing.T, start func() (watch.Interface, error)) []watch.Event {
	t.Helper()
	w, err := start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var got []watch.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("the watch did not end; %d events so far", len(got))
		}
	}
}

// Lists and watches through client-go's own request, framing and watch decoding, for
// pods (plain strings and maps), secrets (bytes fields) and controller revisions (an
// embedded RawExtension, through the apps client). Events come in frames of different
// sizes, so that later frames are read into, and over, the buffer earlier ones were
// decoded from; every event is checked only once all have been read, against what was
// served and against client-go's own clientset. A decoded object or type that pointed
// into that buffer would have changed by then.
func TestWatchThroughClientGo(t *testing.T) {
	status := &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (1234)"}
	bookmark := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1300", Annotations: map[string]string{"k8s.io/initial-events-end": "true"}}}
	secret := func(name string, size int) *corev1.Secret {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*7 + len(name))
		}
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "7"},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"key": data, "ca.crt": data[:size/2]},
		}
	}
	revision := func(name string, size int) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", ResourceVersion: "8"},
			Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"template":"` + strings.Repeat(name, size) + `"}}`)},
			Revision:   int64(size),
		}
	}

	type resource struct {
		name   string
		gv     schema.GroupVersion
		list   runtime.Object
		events []servedEvent
		doList func(kubernetes.Interface) (runtime.Object, error)
		watch  func(kubernetes.Interface) (watch.Interface, error)
	}
	ctx := context.Background()
	for _, r := range []resource{{
		name: "pods",
		gv:   corev1.SchemeGroupVersion,
		list: &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1234"}, Items: []corev1.Pod{*testPod("a", 0), *testPod("b", 5000)}},
		events: []servedEvent{
			{watch.Added, testPod("small", 0)},
			{watch.Modified, testPod("large", 6000)},
			{watch.Added, testPod("medium", 900)},
			{watch.Deleted, testPod("tiny", 0)},
			{watch.Bookmark, bookmark},
			{watch.Modified, testPod("medium-2", 1500)},
			{watch.Error, status},
		},
		doList: func(c kubernetes.Interface) (runtime.Object, error) {
			return c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		},
		watch: func(c kubernetes.Interface) (watch.Interface, error) {
			return c.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{ResourceVersion: "1234"})
		},
	}, {
		name: "secrets",
		gv:   corev1.SchemeGroupVersion,
		list: &corev1.SecretList{Items: []corev1.Secret{*secret("a", 10)}},
		events: []servedEvent{
			{watch.Added, secret("big", 4000)},
			{watch.Added, secret("small", 20)},
			{watch.Modified, secret("mid", 700)},
			{watch.Deleted, secret("x", 1)},
		},
		doList: func(c kubernetes.Interface) (runtime.Object, error) {
			return c.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
		},
		watch: func(c kubernetes.Interface) (watch.Interface, error) {
			return c.CoreV1().Secrets("default").Watch(ctx, metav1.ListOptions{})
		},
	}, {
		name: "controllerrevisions",
		gv:   appsv1.SchemeGroupVersion,
		list: &appsv1.ControllerRevisionList{Items: []appsv1.ControllerRevision{*revision("a", 3)}},
		events: []servedEvent{
			{watch.Added, revision("big", 2000)},
			{watch.Modified, revision("small", 2)},
			{watch.Added, revision("mid", 100)},
		},
		doList: func(c kubernetes.Interface) (runtime.Object, error) {
			return c.AppsV1().ControllerRevisions("default").List(ctx, metav1.ListOptions{})
		},
		watch: func(c kubernetes.Interface) (watch.Interface, error) {
			return c.AppsV1().ControllerRevisions("default").Watch(ctx, metav1.ListOptions{})
		},
	}} {
		t.Run(r.name, func(t *testing.T) {
			srv := httptest.NewServer(&resourceServer{t: t, gv: r.gv, list: r.list, events: r.events})
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf"}, QPS: -1}
			ours, err := NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			stock, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}

			list, err := r.doList(ours)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(list, r.list) {
				t.Errorf("listed\n%#v\nserved\n%#v", list, r.list)
			}
			stockList, err := r.doList(stock)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(list, stockList) {
				t.Errorf("listed\n%#v\nclient-go's clientset lists\n%#v", list, stockList)
			}

			got := watchAll(t, func() (watch.Interface, error) { return r.watch(ours) })
			if len(got) != len(r.events) {
				t.Fatalf("%d events, want %d: %v", len(got), len(r.events), got)
			}
			for i, ev := range got {
				want := r.events[i]
				if ev.Type != want.typ || !apiequality.Semantic.DeepEqual(ev.Object, want.obj) {
					t.Errorf("event %d: %s\n%#v\nwant %s\n%#v", i, ev.Type, ev.Object, want.typ, want.obj)
				}
			}
			stockGot := watchAll(t, func() (watch.Interface, error) { return r.watch(stock) })
			if !reflect.DeepEqual(got, stockGot) {
				t.Errorf("watched\n%#v\nclient-go's clientset watches\n%#v", got, stockGot)
			}
		})
	}
}

// The clientset is client-go's apart from CoreV1 and AppsV1, and all of it shares one
// rate limiter, as kubernetes.NewForConfig's groups do.
func TestClientsetSharesTheRateLimiter(t *testing.T) {
	cs, err := NewForConfig(&rest.Config{Host: "https://example.invalid", QPS: 7, Burst: 9})
	if err != nil {
		t.Fatal(err)
	}
	limiter := cs.Clientset.CoreV1().RESTClient().GetRateLimiter()
	if limiter == nil || limiter.QPS() != 7 {
		t.Fatalf("client-go's groups have limiter %v, want one of 7 qps", limiter)
	}
	for name, c := range map[string]rest.Interface{
		"core":  cs.CoreV1().RESTClient(),
		"apps":  cs.AppsV1().RESTClient(),
		"batch": cs.BatchV1().RESTClient(),
	} {
		if c.GetRateLimiter() != limiter {
			t.Errorf("%s has a limiter of its own", name)
		}
	}
	if cs.CoreV1().RESTClient() == cs.Clientset.CoreV1().RESTClient() {
		t.Error("CoreV1 is client-go's own client")
	}
	if _, err := NewForConfig(&rest.Config{Host: "https://example.invalid", QPS: 7}); err == nil {
		t.Error("QPS without burst accepted; kubernetes.NewForConfig refuses it")
	}
}
