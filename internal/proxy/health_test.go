package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestHealth(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const timeout = time.Minute
	at := func(d time.Duration) time.Time { return start.Add(d) }
	for _, tc := range []struct {
		name string
		// steps run in order against a clock that each step sets.
		steps       []func(h *health, clock *time.Time)
		checkAt     time.Duration
		wantCode    int
		wantUpdated string
	}{
		{
			name:     "starting, within the timeout",
			checkAt:  timeout,
			wantCode: http.StatusOK,
		},
		{
			name:     "never synced past the timeout",
			checkAt:  timeout + time.Second,
			wantCode: http.StatusServiceUnavailable,
		},
		{
			name: "synced, nothing waiting, long after",
			steps: []func(*health, *time.Time){
				func(h *health, c *time.Time) { *c = at(time.Second); h.updated(at(0)) },
			},
			checkAt:     time.Hour,
			wantCode:    http.StatusOK,
			wantUpdated: "2026-01-02T03:04:06Z",
		},
		{
			name: "a change waiting past the timeout",
			steps: []func(*health, *time.Time){
				func(h *health, c *time.Time) { *c = at(time.Second); h.updated(at(0)) },
				func(h *health, c *time.Time) { *c = at(10 * time.Second); h.queued() },
			},
			checkAt:     10*time.Second + timeout + time.Second,
			wantCode:    http.StatusServiceUnavailable,
			wantUpdated: "2026-01-02T03:04:06Z",
		},
		{
			name: "a change queued during a write still waits after it",
			steps: []func(*health, *time.Time){
				func(h *health, c *time.Time) { *c = at(time.Second); h.updated(at(0)) },
				func(h *health, c *time.Time) { *c = at(11 * time.Second); h.queued() },
				func(h *health, c *time.Time) { *c = at(12 * time.Second); h.updated(at(10 * time.Second)) },
			},
			checkAt:     11*time.Second + timeout + time.Second,
			wantCode:    http.StatusServiceUnavailable,
			wantUpdated: "2026-01-02T03:04:17Z",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := start
			h := newHealth(timeout, func() time.Time { return clock })
			for _, step := range tc.steps {
				step(h, &clock)
			}
			clock = at(tc.checkAt)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d", rec.Code, tc.wantCode)
			}
			var body status
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body.String(), err)
			}
			if body.LastUpdated != tc.wantUpdated || body.CurrentTime != at(tc.checkAt).Format(time.RFC3339Nano) || !body.NodeEligible {
				t.Errorf("body %+v, want lastUpdated %q at %s", body, tc.wantUpdated, at(tc.checkAt))
			}
		})
	}
}
