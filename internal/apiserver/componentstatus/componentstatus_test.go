package componentstatus_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"mizzen/internal/apiserver/componentstatus"
)

func TestProbeHealthz(t *testing.T) {
	ok := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer ok.Close()
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "[-]poststarthook failed", http.StatusInternalServerError)
	}))
	defer failing.Close()
	closed := httptest.NewTLSServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name        string
		url         string
		wantStatus  corev1.ConditionStatus
		wantMessage string // substring
	}{
		{name: "healthy", url: ok.URL + "/healthz", wantStatus: corev1.ConditionTrue, wantMessage: "ok"},
		{name: "500", url: failing.URL + "/healthz", wantStatus: corev1.ConditionFalse, wantMessage: "HTTP probe failed with statuscode: 500"},
		{name: "nothing listening", url: closedURL + "/healthz", wantStatus: corev1.ConditionFalse, wantMessage: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := componentstatus.ProbeHealthz(context.Background(), tt.url)
			if got.Type != corev1.ComponentHealthy || got.Status != tt.wantStatus || !strings.Contains(got.Message, tt.wantMessage) || got.Error != "" {
				t.Fatalf("got %+v, want status %s and message containing %q", got, tt.wantStatus, tt.wantMessage)
			}
			if tt.wantStatus == corev1.ConditionTrue && got.Message != "ok" {
				t.Fatalf("message = %q, want the body", got.Message)
			}
		})
	}
}

func TestProbeStore(t *testing.T) {
	got := componentstatus.ProbeStore(context.Background(), func(context.Context) (int64, error) { return 7, nil })
	if got.Status != corev1.ConditionTrue || got.Message != "ok" {
		t.Fatalf("answering store: %+v", got)
	}
	got = componentstatus.ProbeStore(context.Background(), func(context.Context) (int64, error) { return 0, errors.New("etcdserver: no leader") })
	if got.Status != corev1.ConditionFalse || got.Error != "etcdserver: no leader" {
		t.Fatalf("failing store: %+v", got)
	}
}

func TestRow(t *testing.T) {
	cs := &corev1.ComponentStatus{Conditions: []corev1.ComponentCondition{{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Message: "m", Error: "e"}}}
	cs.Name = "scheduler"
	got := componentstatus.Row(cs)
	want := []interface{}{"scheduler", "Unhealthy", "m", "e"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row = %v, want %v", got, want)
		}
	}
	if got := componentstatus.Row(&corev1.ComponentStatus{}); got[1] != "Unknown" {
		t.Fatalf("row without conditions = %v, want Unknown status", got)
	}
}
