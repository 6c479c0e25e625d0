package nodemember

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// fakeMembers is an etcd membership; removing fails while failRemove is set.
type fakeMembers struct {
	names      []string
	failRemove error
}

func (f *fakeMembers) Names(context.Context) ([]string, error) { return slices.Clone(f.names), nil }

func (f *fakeMembers) Remove(_ context.Context, name string) error {
	if f.failRemove != nil {
		return f.failRemove
	}
	f.names = slices.DeleteFunc(f.names, func(n string) bool { return n == name })
	return nil
}

func node(name string, member string, deleting bool, finalizers ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers}}
	if member != "" {
		n.Annotations = map[string]string{MemberAnnotation: member}
	}
	if deleting {
		n.DeletionTimestamp = &metav1.Time{}
	}
	return n
}

// TestSync: a server's Node being deleted has its member removed, then its finalizer;
// a member already gone only drops the finalizer; the remover's own member, a Node not
// being deleted and a Node without the finalizer are left; a failed removal keeps the
// finalizer and says why in an event.
func TestSync(t *testing.T) {
	for _, tc := range []struct {
		name          string
		node          *corev1.Node
		failRemove    error
		wantMembers   []string
		wantFinalizer bool
		wantErr       bool
		wantEvent     string
	}{
		{"deleted server node", node("b", "member-b", true, Finalizer, "other"), nil, []string{"member-a", "member-c"}, false, false, "Normal EtcdMemberRemoved"},
		{"member already gone", node("d", "member-d", true, Finalizer), nil, []string{"member-a", "member-b", "member-c"}, false, false, ""},
		{"own member", node("a", "member-a", true, Finalizer), nil, []string{"member-a", "member-b", "member-c"}, true, false, "Warning EtcdMemberNotRemoved"},
		{"not being deleted", node("b", "member-b", false, Finalizer), nil, []string{"member-a", "member-b", "member-c"}, true, false, ""},
		{"not a server's node", node("e", "", true, "other"), nil, []string{"member-a", "member-b", "member-c"}, false, false, ""},
		{"removal refused", node("c", "member-c", true, Finalizer), errors.New("etcdserver: unhealthy cluster"), []string{"member-a", "member-b", "member-c"}, true, true, "Warning EtcdMemberNotRemoved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.node)
			members := &fakeMembers{names: []string{"member-a", "member-b", "member-c"}, failRemove: tc.failRemove}
			recorder := record.NewFakeRecorder(10)
			r := &Remover{Client: client, Members: members, Own: "member-a", Recorder: recorder, Log: slog.New(slog.DiscardHandler)}
			err := r.Sync(context.Background(), tc.node)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Sync: %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(members.names, tc.wantMembers) {
				t.Errorf("members %v, want %v", members.names, tc.wantMembers)
			}
			got, err := client.CoreV1().Nodes().Get(context.Background(), tc.node.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(got.Finalizers, Finalizer) != tc.wantFinalizer {
				t.Errorf("finalizers %v, want ours: %v", got.Finalizers, tc.wantFinalizer)
			}
			if slices.Contains(tc.node.Finalizers, "other") && !slices.Contains(got.Finalizers, "other") {
				t.Errorf("another finalizer was dropped: %v", got.Finalizers)
			}
			event := ""
			select {
			case event = <-recorder.Events:
			default:
			}
			if !strings.HasPrefix(event, tc.wantEvent) || (tc.wantEvent == "" && event != "") {
				t.Errorf("event %q, want %q", event, tc.wantEvent)
			}
		})
	}
}

// TestMark: a server's Node gets its member's annotation and the finalizer, once.
func TestMark(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(node("a", "", false, "other"))
	for range 2 {
		if err := mark(ctx, client, "a", "member-a"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if got.Annotations[MemberAnnotation] != "member-a" || !slices.Equal(got.Finalizers, []string{"other", Finalizer}) {
		t.Errorf("marked node: annotations %v finalizers %v", got.Annotations, got.Finalizers)
	}
	if err := mark(ctx, client, "missing", "member-a"); err == nil {
		t.Error("marking a node that is not registered yet: no error")
	}
}
