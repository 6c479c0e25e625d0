package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/trace"
)

// The pod's journey (internal/trace) as the timeline pages draw it: read with the
// session's token, so a user sees the journey of exactly the pods and events RBAC
// lets them read.

type journeyStep struct {
	Label     string    `json:"label"`
	Component string    `json:"component"`
	At        time.Time `json:"at"`
	Precise   bool      `json:"precise"`
	Source    string    `json:"source"`
	Detail    string    `json:"detail,omitempty"`
	// TookMs is the time since the step before; SinceMs since the pod was created.
	TookMs  int64 `json:"tookMs"`
	SinceMs int64 `json:"sinceMs"`
}

type podJourney struct {
	Namespace string        `json:"namespace"`
	Pod       string        `json:"pod"`
	Node      string        `json:"node"`
	Steps     []journeyStep `json:"steps"`
	Pending   []string      `json:"pending"`
}

type percentiles struct {
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90"`
	P99 int64 `json:"p99"`
	Max int64 `json:"max"`
}

type stepSummary struct {
	Label     string      `json:"label"`
	Component string      `json:"component"`
	Pods      int         `json:"pods"`
	Took      percentiles `json:"took"`
	Since     percentiles `json:"since"`
}

type deploymentJourneys struct {
	Pods  int           `json:"pods"`
	Ready int           `json:"ready"`
	Steps []stepSummary `json:"steps"`
}

// sessionClient is a client of the apiserver as the request's user (userConfig).
func (d *dashboard) sessionClient(r *http.Request) (kubernetes.Interface, bool) {
	cfg, ok := d.userConfig(r)
	if !ok {
		return nil, false
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cs, err == nil
}

func (d *dashboard) servePodJourney(w http.ResponseWriter, r *http.Request) {
	client, ok := d.sessionClient(r)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "log in first")
		return
	}
	j, err := trace.Pod(r.Context(), client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, journeyOf(j))
}

func (d *dashboard) serveDeploymentJourneys(w http.ResponseWriter, r *http.Request) {
	client, ok := d.sessionClient(r)
	if !ok {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "log in first")
		return
	}
	journeys, err := trace.Deployment(r.Context(), client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	out := deploymentJourneys{Pods: len(journeys), Steps: []stepSummary{}}
	for _, j := range journeys {
		if n := len(j.Steps); n > 0 && j.Steps[n-1].Name == trace.StepReady {
			out.Ready++
		}
	}
	for _, s := range trace.Summarize(journeys) {
		out.Steps = append(out.Steps, stepSummary{Label: s.Label, Component: s.Component, Pods: len(s.Took),
			Took: percentilesOf(s.Took), Since: percentilesOf(s.Since)})
	}
	writeJSON(w, out)
}

func journeyOf(j trace.Journey) podJourney {
	out := podJourney{Namespace: j.Namespace, Pod: j.Pod, Node: j.Node, Steps: []journeyStep{}, Pending: j.Pending}
	if out.Pending == nil {
		out.Pending = []string{}
	}
	for i, s := range j.Steps {
		out.Steps = append(out.Steps, journeyStep{Label: s.Label(), Component: s.Component, At: s.At, Precise: s.Precise,
			Source: s.Source, Detail: s.Detail, TookMs: j.Took(i).Milliseconds(), SinceMs: j.SinceCreated(i).Milliseconds()})
	}
	return out
}

func percentilesOf(ds []time.Duration) percentiles {
	return percentiles{P50: trace.Percentile(ds, 50).Milliseconds(), P90: trace.Percentile(ds, 90).Milliseconds(),
		P99: trace.Percentile(ds, 99).Milliseconds(), Max: trace.Percentile(ds, 100).Milliseconds()}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// writeAPIError passes on the apiserver's own status (404, 403, 401) as the proxy would.
func writeAPIError(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		writeStatus(w, int(s.Code), string(s.Reason), s.Message)
		return
	}
	writeStatus(w, http.StatusBadGateway, "ServiceUnavailable", "reading the journey: "+err.Error())
}
