package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

func TestWriteExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want metav1.Status
	}{
		{"success", nil, metav1.Status{Status: metav1.StatusSuccess}},
		{"exit code", fmt.Errorf("stream: %w", utilexec.CodeExitError{Err: errors.New("exit status 3"), Code: 3}), metav1.Status{
			Status: metav1.StatusFailure, Reason: "NonZeroExitCode", Message: "command terminated with non-zero exit code: exit status 3",
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: "3"}}},
		}},
		{"other failure", errors.New("runtime went away"), metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: "runtime went away"}},
	} {
		var buf bytes.Buffer
		writeExitStatus(&buf, tc.err)
		var got metav1.Status
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, buf.String())
		}
		tc.want.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(tc.want)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("%s: got %s, want %s", tc.name, gotJSON, wantJSON)
		}
	}
}

func TestResizeQueue(t *testing.T) {
	ended := false
	q := &resizeQueue{r: strings.NewReader(`{"Width":80,"Height":24}{"Width":120,"Height":40}not json`), onEnd: func() { ended = true }}
	for _, want := range []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 120, Height: 40}} {
		got := q.Next()
		if got == nil || *got != want {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if ended {
		t.Error("the session ended before the channel did")
	}
	if got := q.Next(); got != nil || !ended {
		t.Errorf("after the channel ends: next %v, session ended %v", got, ended)
	}
}

// An attach takes the container's TTY setting, whatever the client asked: kubectl run
// -it with stdin not a terminal asks for no TTY (and for stderr) to a TTY container,
// which the runtime would serve with a stderr that never ends.
func TestAttachTakesTheContainersTTY(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shell"}, Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "init"}},
		Containers:          []v1.Container{{Name: "sh", TTY: true, Stdin: true}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", TTY: true}}},
	}}
	s := &Server{opts: Options{Pods: func() []*v1.Pod { return []*v1.Pod{pod} }}}
	cases := []struct {
		container string
		asked     streamOptions
		want      streamOptions
	}{
		{"sh", streamOptions{stdin: true, stdout: true, stderr: true}, streamOptions{stdin: true, stdout: true, tty: true}},
		{"debug", streamOptions{stdout: true, stderr: true}, streamOptions{stdout: true, tty: true}},
		{"init", streamOptions{stdin: true, stdout: true, tty: true}, streamOptions{stdin: true, stdout: true}},
		{"gone", streamOptions{stdout: true, stderr: true}, streamOptions{stdout: true, stderr: true}},
	}
	for _, c := range cases {
		if got := s.attachTTY("default", "shell", c.container, c.asked); got != c.want {
			t.Errorf("%s: asked %+v, got %+v, want %+v", c.container, c.asked, got, c.want)
		}
	}
}
