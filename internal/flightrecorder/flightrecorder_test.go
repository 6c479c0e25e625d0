package flightrecorder

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/trace"
	"testing"
	"time"

	exptrace "golang.org/x/exp/trace"
)

// TestServesWhatHappenedBeforeTheRequest: a message the process logged to its trace
// before anyone asked for one is in the trace the recorder serves afterwards, which a
// trace started at the request (/debug/pprof/trace) cannot hold.
func TestServesWhatHappenedBeforeTheRequest(t *testing.T) {
	r, err := Start(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	trace.Log(context.Background(), "stall", "before the request")
	time.Sleep(50 * time.Millisecond)

	srv := httptest.NewServer(r)
	defer srv.Close()
	resp, err := http.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	events, err := exptrace.NewReader(resp.Body)
	if err != nil {
		t.Fatalf("not an execution trace: %v", err)
	}
	for {
		ev, err := events.ReadEvent()
		if errors.Is(err, io.EOF) {
			t.Fatal("the trace has no log message from before the request")
		}
		if err != nil {
			t.Fatalf("reading the trace: %v", err)
		}
		if ev.Kind() == exptrace.EventLog && ev.Log().Category == "stall" && ev.Log().Message == "before the request" {
			return
		}
	}
}

// TestOneRecorderPerProcess: a second recorder while one runs is an error, not a
// second window (the runtime allows one).
func TestOneRecorderPerProcess(t *testing.T) {
	r, err := Start(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if second, err := Start(time.Second); err == nil {
		second.Stop()
		t.Fatal("a second recorder started beside the first")
	}
}
