package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"mizzen/internal/scheduler/framework"
)

// TestQueueScenarios replays testdata/*.txt. Commands:
//
//	add name=N [prio=P] [gated]      a new pending pod
//	update name=N [label=V] [ungate] [status-only]
//	delete name=N
//	pop                              pops the head (prints it and its attempt number): the
//	                                 active heap's, else the rejected pod in back-off expiring first
//	fail name=N plugins=A,B          the popped pod's attempt was rejected by plugins
//	error name=N                     the popped pod's attempt failed with an error
//	event resource=R action=A[,A]    a cluster event (MoveAllToActiveOrBackoffQueue)
//	tick d=DURATION                  advance the clock and run the periodic flushes due
//
// Every command prints the queues afterwards.
func TestQueueScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		q := New(Options{Clock: clock, PluginEvents: map[string][]framework.ClusterEventWithHint{
			"NodeResourcesFit": {
				{Event: framework.ClusterEvent{Resource: framework.AssignedPod, ActionType: framework.Delete}},
				{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeAllocatable}},
			},
			"TaintToleration": {
				{Event: framework.ClusterEvent{Resource: framework.Node, ActionType: framework.Add | framework.UpdateNodeTaint}},
			},
		}})
		pods := map[string]*v1.Pod{}
		popped := map[string]*framework.QueuedPodInfo{}
		cycles := map[string]int64{}
		lastBackoffFlush, lastLeftoverFlush := clock.Now(), clock.Now()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var out strings.Builder
			name := arg(d, "name")
			switch d.Cmd {
			case "add":
				p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
				if s := arg(d, "prio"); s != "" {
					v, _ := strconv.Atoi(s)
					prio := int32(v)
					p.Spec.Priority = &prio
				}
				if d.HasArg("gated") {
					p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "wait"}}
				}
				pods[name] = p
				// Distinct ages keep the active order deterministic.
				clock.Step(time.Millisecond)
				q.Add(p)
			case "update":
				old := pods[name]
				p := old.DeepCopy()
				if v := arg(d, "label"); v != "" {
					p.Labels = map[string]string{"l": v}
				}
				if d.HasArg("ungate") {
					p.Spec.SchedulingGates = nil
				}
				if d.HasArg("status-only") {
					p.Status.Message = "changed"
				}
				pods[name] = p
				q.Update(old, p)
			case "delete":
				q.Delete(pods[name])
			case "activate":
				q.Activate(pods[name])
			case "pop":
				q.mu.Lock()
				poppable := q.poppableLocked()
				q.mu.Unlock()
				if !poppable {
					out.WriteString("nothing to pop\n")
					break
				}
				p, err := q.Pop(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				popped[p.Pod.Name] = p
				cycles[p.Pod.Name] = q.SchedulingCycle()
				fmt.Fprintf(&out, "popped %s (attempt %d)\n", p.Pod.Name, p.Attempts)
			case "fail", "error":
				p := popped[name]
				if p == nil {
					t.Fatalf("%s was not popped", name)
				}
				p.UnschedulablePlugins = nil
				if d.Cmd == "fail" {
					p.UnschedulablePlugins = sets.New(strings.Split(arg(d, "plugins"), ",")...)
				}
				delete(popped, name)
				q.AddUnschedulableIfNotPresent(p, cycles[name])
			case "event":
				var actions framework.ActionType
				for _, a := range strings.Split(arg(d, "action"), ",") {
					actions |= map[string]framework.ActionType{
						"Add": framework.Add, "Delete": framework.Delete, "UpdateNodeTaint": framework.UpdateNodeTaint,
						"UpdateNodeLabel": framework.UpdateNodeLabel, "UpdateNodeAllocatable": framework.UpdateNodeAllocatable,
					}[a]
				}
				q.MoveAllToActiveOrBackoffQueue(framework.ClusterEvent{Resource: framework.EventResource(arg(d, "resource")), ActionType: actions}, nil, nil, nil)
			case "tick":
				dur, err := time.ParseDuration(arg(d, "d"))
				if err != nil {
					t.Fatal(err)
				}
				// Step one second at a time so flushes happen when Run would do them.
				for step := time.Duration(0); step < dur; step += time.Second {
					clock.Step(time.Second)
					if clock.Since(lastBackoffFlush) >= backoffFlushInterval {
						q.FlushBackoffCompleted()
						lastBackoffFlush = clock.Now()
					}
					if clock.Since(lastLeftoverFlush) >= unschedulableFlushInterval {
						q.FlushUnschedulableLeftover()
						lastLeftoverFlush = clock.Now()
					}
				}
			default:
				t.Fatalf("unknown command %q", d.Cmd)
			}
			dump := q.Dump()
			names := []string{Active, Backoff, Unschedulable, Gated}
			for _, n := range names {
				keys := dump[n]
				short := make([]string, len(keys))
				for i, k := range keys {
					short[i] = strings.TrimPrefix(k, "ns/")
				}
				if n == Unschedulable || n == Gated {
					sort.Strings(short)
				}
				fmt.Fprintf(&out, "%s: [%s]\n", n, strings.Join(short, " "))
			}
			return out.String()
		})
	})
}

func arg(d *datadriven.TestData, key string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key && len(a.Vals) > 0 {
			return a.Vals[0]
		}
	}
	return ""
}
