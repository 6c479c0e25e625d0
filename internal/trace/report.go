package trace

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Pod reads a pod and the events about it and returns its journey.
func Pod(ctx context.Context, client kubernetes.Interface, ns, name string) (Journey, error) {
	pod, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Journey{}, err
	}
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": name}.String()})
	if err != nil {
		return Journey{}, err
	}
	return PodJourney(pod, events.Items), nil
}

// Deployment returns the journeys of the pods of a Deployment's ReplicaSets.
func Deployment(ctx context.Context, client kubernetes.Interface, ns, name string) ([]Journey, error) {
	d, err := client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	sets, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, rs := range sets.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
			owned[string(rs.UID)] = true
		}
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	events, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.kind": "Pod"}.String()})
	if err != nil {
		return nil, err
	}
	var out []Journey
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOf(p); ref == nil || !owned[string(ref.UID)] {
			continue
		}
		out = append(out, PodJourney(p, events.Items))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Pod < out[b].Pod })
	return out, nil
}

func clock(s Step) string {
	if s.Precise {
		return s.At.UTC().Format("15:04:05.000")
	}
	return s.At.UTC().Format("15:04:05")
}

func duration(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

// PrintPod writes a journey as a table: each step, who recorded it, when (UTC), how
// long after the step before and after creation, and what the record says.
func PrintPod(w io.Writer, j Journey) error {
	node := j.Node
	if node == "" {
		node = "<none>"
	}
	day := ""
	if len(j.Steps) > 0 {
		day = " on " + j.Steps[0].At.UTC().Format("2006-01-02")
	}
	fmt.Fprintf(w, "Pod %s/%s, node %s%s (times UTC)\n", j.Namespace, j.Pod, node, day)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tCOMPONENT\tAT\tTOOK\tSINCE CREATED\tRECORD")
	for i, s := range j.Steps {
		took := "-"
		if i > 0 {
			took = duration(j.Took(i))
		}
		record := s.Source
		if s.Detail != "" {
			record += ": " + s.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Label(), s.Component, clock(s), took, duration(j.SinceCreated(i)), record)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(j.Pending) > 0 {
		fmt.Fprintf(w, "Not recorded (yet): %s\n", strings.Join(j.Pending, ", "))
	}
	_, err := fmt.Fprintln(w, "Times without a fraction are recorded to the second; a step that seems to come before the one above it took 0s.")
	return err
}

// StepStats is one step's durations over a set of pods.
type StepStats struct {
	Label, Component string
	// Took: time since the step before, per pod that recorded it; Since: since creation.
	Took, Since []time.Duration
}

// Summarize gathers, per step label in journey order, each pod's time for it.
func Summarize(journeys []Journey) []StepStats {
	var order []string
	byLabel := map[string]*StepStats{}
	for _, j := range journeys {
		for i, s := range j.Steps {
			st := byLabel[s.Label()]
			if st == nil {
				component := s.Component
				if strings.HasPrefix(component, "kubelet/") {
					component = "kubelet"
				}
				st = &StepStats{Label: s.Label(), Component: component}
				byLabel[s.Label()] = st
				order = append(order, s.Label())
			}
			st.Took = append(st.Took, j.Took(i))
			st.Since = append(st.Since, j.SinceCreated(i))
		}
	}
	out := make([]StepStats, 0, len(order))
	for _, l := range order {
		out = append(out, *byLabel[l])
	}
	return out
}

// Percentile is the nearest-rank p-th percentile (0 < p <= 100) of ds.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// PrintDeployment writes, per step, how many pods recorded it and the percentiles of
// the time it took after the step before, then of the time since creation.
func PrintDeployment(w io.Writer, ns, name string, journeys []Journey) error {
	ready := 0
	for _, j := range journeys {
		if len(j.Steps) > 0 && j.Steps[len(j.Steps)-1].Name == StepReady {
			ready++
		}
	}
	fmt.Fprintf(w, "Deployment %s/%s: %d pods, %d ready\n", ns, name, len(journeys), ready)
	stats := Summarize(journeys)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tCOMPONENT\tPODS\tTOOK P50\tP90\tP99\tMAX\tSINCE CREATED P50\tP90\tP99\tMAX")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%s\t%d", s.Label, s.Component, len(s.Took))
		for _, ds := range [][]time.Duration{s.Took, s.Since} {
			for _, p := range []float64{50, 90, 99, 100} {
				fmt.Fprintf(tw, "\t%s", duration(Percentile(ds, p)))
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
