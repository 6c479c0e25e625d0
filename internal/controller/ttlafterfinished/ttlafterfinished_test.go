package ttlafterfinished

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func job(ttl *int32, finished batchv1.JobConditionType, at time.Time) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "pi", Namespace: "default", UID: "uid-pi"},
		Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl}}
	if finished != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: finished, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	}
	return j
}

func TestDeletesFinishedJobsAfterTheirTTL(t *testing.T) {
	ttl := int32(100)
	zero := int32(0)
	for _, tt := range []struct {
		name       string
		job        *batchv1.Job
		wantDelete bool
	}{
		{"completed and expired", job(&ttl, batchv1.JobComplete, t0.Add(-101*time.Second)), true},
		{"failed and expired", job(&ttl, batchv1.JobFailed, t0.Add(-200*time.Second)), true},
		{"zero ttl", job(&zero, batchv1.JobComplete, t0), true},
		{"not expired yet", job(&ttl, batchv1.JobComplete, t0.Add(-99*time.Second)), false},
		{"still running", job(&ttl, "", t0), false},
		{"no ttl", job(nil, batchv1.JobComplete, t0.Add(-time.Hour)), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.job)
			f := informers.NewSharedInformerFactory(client, 0)
			c := New(client, f, clocktesting.NewFakeClock(t0))
			f.Batch().V1().Jobs().Informer().GetIndexer().Add(tt.job)
			if err := c.Sync(context.Background(), "default/pi"); err != nil {
				t.Fatal(err)
			}
			var deletes []clienttesting.DeleteAction
			for _, a := range client.Actions() {
				if d, ok := a.(clienttesting.DeleteAction); ok {
					deletes = append(deletes, d)
				}
			}
			if got := len(deletes) == 1; got != tt.wantDelete {
				t.Fatalf("deleted=%v, want %v", got, tt.wantDelete)
			}
			if tt.wantDelete {
				opts := deletes[0].GetDeleteOptions()
				if opts.PropagationPolicy == nil || *opts.PropagationPolicy != metav1.DeletePropagationBackground {
					t.Errorf("propagation %v, want Background", opts.PropagationPolicy)
				}
			}
		})
	}
}

func TestFreshReadWinsOverAStaleCache(t *testing.T) {
	ttl, longer := int32(10), int32(3600)
	stale := job(&ttl, batchv1.JobComplete, t0.Add(-time.Minute))
	current := stale.DeepCopy()
	current.Spec.TTLSecondsAfterFinished = &longer
	client := fake.NewClientset(current)
	f := informers.NewSharedInformerFactory(client, 0)
	c := New(client, f, clocktesting.NewFakeClock(t0))
	f.Batch().V1().Jobs().Informer().GetIndexer().Add(stale)
	if err := c.Sync(context.Background(), "default/pi"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.BatchV1().Jobs("default").Get(context.Background(), "pi", metav1.GetOptions{}); err != nil {
		t.Errorf("job deleted although its TTL was raised: %v", err)
	}
}
