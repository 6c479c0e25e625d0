package proxy

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// health tracks whether the rules keep up with the API, for /healthz and /livez as
// upstream's proxy serves them: unhealthy once a change has waited longer than the
// timeout without being written.
type health struct {
	timeout time.Duration
	now     func() time.Time

	mu          sync.Mutex
	lastQueued  time.Time // the oldest change not yet written; zero when none waits
	lastUpdated time.Time // the last successful write
}

func newHealth(timeout time.Duration, now func() time.Time) *health {
	return &health{timeout: timeout, now: now, lastQueued: now()}
}

// queued records that a change arrived, unless an older one is already waiting.
func (h *health) queued() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lastQueued.IsZero() {
		h.lastQueued = h.now()
	}
}

// updated records a successful write of everything queued before it began.
func (h *health) updated(began time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = h.now()
	if !h.lastQueued.After(began) {
		h.lastQueued = time.Time{}
	}
}

// status is the health answer's body, upstream's fields.
type status struct {
	LastUpdated  string `json:"lastUpdated"`
	CurrentTime  string `json:"currentTime"`
	NodeEligible bool   `json:"nodeEligible"`
}

// healthy reports whether no change has waited past the timeout.
func (h *health) healthy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastQueued.IsZero() || h.now().Sub(h.lastQueued) <= h.timeout
}

func (h *health) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	healthy := h.healthy()
	h.mu.Lock()
	now := h.now()
	body := status{CurrentTime: now.UTC().Format(time.RFC3339Nano), NodeEligible: true}
	if !h.lastUpdated.IsZero() {
		body.LastUpdated = h.lastUpdated.UTC().Format(time.RFC3339Nano)
	}
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !healthy {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
