package main

import (
	"slices"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestServiceAccountIssuerFlag parses --service-account-issuer as upstream's
// StringArray: repeatable, in order, and a comma does not split a value.
func TestServiceAccountIssuerFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, nil},
		{[]string{"--service-account-issuer", "https://new.example"}, []string{"https://new.example"}},
		{[]string{"--service-account-issuer=https://new.example", "--service-account-issuer", "https://old.example"}, []string{"https://new.example", "https://old.example"}},
		{[]string{"--service-account-issuer", "https://a.example,https://b.example"}, []string{"https://a.example,https://b.example"}},
	} {
		for _, withDisable := range []bool{true, false} { // server and apiserver
			var f serverFlags
			cmd := &cobra.Command{Use: "server"}
			f.add(cmd, withDisable)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatalf("%q: %v", tc.args, err)
			}
			if got := f.options().ServiceAccountIssuers; !slices.Equal(got, tc.want) {
				t.Errorf("%q: ServiceAccountIssuers = %q, want %q", tc.args, got, tc.want)
			}
		}
	}
}

// TestFlightRecorderNeedsProfiling: a window asked for without --profiling is an error
// at start, not a recorder that runs and that nobody can read; with it, the recorder
// runs and is served.
func TestFlightRecorderNeedsProfiling(t *testing.T) {
	if _, _, err := (&serverFlags{flightRecorderWindow: time.Second}).startFlightRecorder(); err == nil {
		t.Fatal("--flight-recorder-window without --profiling started")
	}
	handler, stop, err := (&serverFlags{flightRecorderWindow: time.Second, profiling: true}).startFlightRecorder()
	if err != nil || handler == nil {
		t.Fatalf("with --profiling: handler %v, error %v", handler, err)
	}
	stop()
	if handler, _, err := (&serverFlags{profiling: true}).startFlightRecorder(); err != nil || handler != nil {
		t.Fatalf("without a window: handler %v, error %v; want neither", handler, err)
	}
}
