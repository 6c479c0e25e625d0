package server

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSampleTimeKeepsFractions: a sample's time survives JSON with its nanoseconds, and
// a client decoding it as upstream's metav1.Time reads the same instant.
func TestSampleTimeKeepsFractions(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 35, 2, 987654321, time.UTC)
	data, err := json.Marshal(CPUStats{Time: SampleTime{at}})
	if err != nil {
		t.Fatal(err)
	}
	var ours CPUStats
	if err := json.Unmarshal(data, &ours); err != nil || !ours.Time.Equal(at) {
		t.Errorf("decoded %s as %v (%v), want %v", data, ours.Time, err, at)
	}
	var upstream struct {
		Time metav1.Time `json:"time"`
	}
	if err := json.Unmarshal(data, &upstream); err != nil || !upstream.Time.Time.Equal(at) {
		t.Errorf("metav1.Time decoded %s as %v (%v), want %v", data, upstream.Time, err, at)
	}
	var zero CPUStats
	if err := json.Unmarshal([]byte(`{"time":null}`), &zero); err != nil || !zero.Time.IsZero() {
		t.Errorf("null time: %v, %v", zero.Time, err)
	}
}
