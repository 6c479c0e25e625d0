package writeexpect

import (
	"testing"
	"time"
)

func TestObservedWaitsForTheInformer(t *testing.T) {
	informer := map[string]bool{"old": true}
	in := func(n string) bool { return informer[n] }
	tr := New(time.Hour)
	if !tr.Observed("ns/svc", in) {
		t.Fatal("a key with no writes must count as observed")
	}
	tr.Expect("ns/svc", []string{"new"}, []string{"old"})
	if tr.Observed("ns/svc", in) {
		t.Fatal("observed before the informer showed the created object")
	}
	informer["new"] = true
	if tr.Observed("ns/svc", in) {
		t.Fatal("observed before the informer dropped the deleted object")
	}
	delete(informer, "old")
	if !tr.Observed("ns/svc", in) {
		t.Fatal("not observed once the informer shows both writes")
	}
	delete(informer, "new") // someone else deleted it: the record is gone, no wait
	if !tr.Observed("ns/svc", in) {
		t.Fatal("a dropped record came back")
	}
}

func TestObservedGivesUpAfterTheTimeout(t *testing.T) {
	tr := New(time.Nanosecond)
	tr.Expect("k", []string{"never-seen"}, nil)
	time.Sleep(time.Millisecond)
	if !tr.Observed("k", func(string) bool { return false }) {
		t.Fatal("still waiting after the timeout")
	}
}
