package compression

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
)

// testItems is a list as a JSON array: items after the first are preceded by a comma.
type testItems struct {
	keys   []string
	revs   []int64
	bodies map[string][]byte // by key
}

func (l *testItems) Len() int                        { return len(l.keys) }
func (l *testItems) ID(i int) (string, int64)        { return l.keys[i], l.revs[i] }
func (l *testItems) Append(dst []byte, i int) []byte { return appendItem(dst, i, l.bodies[l.keys[i]]) }

func appendItem(dst []byte, i int, body []byte) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	return append(dst, body...)
}

// podLike is a pod-sized JSON object whose name, uid and revision vary.
func podLike(name string, rev int64) []byte {
	return fmt.Appendf(nil, `{"metadata":{"name":%q,"namespace":"default","uid":"%x-4a5b-9c1d-%012x","resourceVersion":"%d","labels":{"app":"bench","tier":"backend"},"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{},"f:ports":{}}}}}}]},"spec":{"containers":[{"name":"app","image":"registry.example/app:1.0","ports":[{"containerPort":8080,"protocol":"TCP"}],"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","schedulerName":"default-scheduler","enableServiceLinks":true},"status":{"phase":"Pending","qosClass":"BestEffort"}}`,
		name, rev*7919, rev*104729, rev)
}

func newTestItems(n int) *testItems {
	l := &testItems{bodies: map[string][]byte{}}
	for i := range n {
		key := fmt.Sprintf("/pods/default/pod-%05d", i)
		l.keys = append(l.keys, key)
		l.revs = append(l.revs, int64(1000+i))
		l.bodies[key] = podLike(key, int64(1000+i))
	}
	return l
}

// plain is the list's bytes, uncompressed.
func (l *testItems) plain() []byte {
	var b []byte
	for i := range l.keys {
		b = l.Append(b, i)
	}
	return b
}

// write writes the list through c between "[" and "]" and returns the gzip body.
func write(t *testing.T, c *Chunks, l Items) []byte {
	t.Helper()
	var body bytes.Buffer
	s := newStream(&body)
	if _, err := s.Write([]byte("[")); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(s, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("]")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return body.Bytes()
}

func checkList(t *testing.T, c *Chunks, l *testItems) []byte {
	t.Helper()
	body := write(t, c, l)
	want := append(append([]byte("["), l.plain()...), ']')
	if got := gunzip(t, body); !bytes.Equal(got, want) {
		t.Fatalf("decoded list of %d items differs from the items (%d bytes, want %d)", len(l.keys), len(got), len(want))
	}
	return body
}

func TestChunksServeTheListAsItChanges(t *testing.T) {
	c := NewChunks()
	l := newTestItems(3000)
	first := checkList(t, c, l)
	_, chunks := c.Size()
	if chunks == 0 {
		t.Fatal("nothing kept")
	}
	if again := checkList(t, c, l); !bytes.Equal(again, first) {
		t.Error("the same list was not written from the same chunks")
	}

	// Change an item, delete one, insert one: each list is still the items.
	change := func(i int) {
		l.revs[i] += 5000
		l.bodies[l.keys[i]] = podLike(l.keys[i], l.revs[i])
	}
	change(1500)
	checkList(t, c, l)
	l.keys = slices.Delete(l.keys, 700, 701)
	l.revs = slices.Delete(l.revs, 700, 701)
	checkList(t, c, l)
	l.keys = slices.Insert(l.keys, 10, "/pods/default/pod-00009a")
	l.revs = slices.Insert(l.revs, 10, 9000)
	l.bodies["/pods/default/pod-00009a"] = podLike("inserted", 9000)
	checkList(t, c, l)
	change(0)
	change(len(l.keys) - 1)
	checkList(t, c, l)

	// Parts of the list (a selector's), and the list from another start.
	part := &testItems{bodies: l.bodies}
	for i := 0; i < len(l.keys); i += 3 {
		part.keys = append(part.keys, l.keys[i])
		part.revs = append(part.revs, l.revs[i])
	}
	checkList(t, c, part)
	tail := &testItems{bodies: l.bodies, keys: l.keys[1234:], revs: l.revs[1234:]}
	checkList(t, c, tail)

	// Items of unknown revision are written, never kept.
	unknown := &testItems{bodies: l.bodies, keys: l.keys[:200], revs: make([]int64, 200)}
	before, _ := c.Size()
	checkList(t, c, unknown)
	if after, _ := c.Size(); after != before {
		t.Errorf("items of unknown revision kept: %d bytes of segments, were %d", after, before)
	}
}

func TestChunksUnusedAreForgotten(t *testing.T) {
	c := NewChunks()
	old := newTestItems(500)
	checkList(t, c, old)
	_, kept := c.Size()
	other := newTestItems(100)
	for i := range other.keys {
		other.revs[i] += 100000
	}
	for range 2 * forgetAfter {
		write(t, c, other)
	}
	if _, now := c.Size(); now >= kept {
		t.Errorf("%d chunks kept after the list that used %d stopped being asked for", now, kept)
	}
}

func TestChunksOfAResourceNoLongerListedAreForgotten(t *testing.T) {
	c := NewChunks()
	c.idleAfter = 50 * time.Millisecond
	l := newTestItems(500)
	checkList(t, c, l)
	if bytes, _ := c.Size(); bytes == 0 {
		t.Fatal("nothing kept after a list")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		bytes, chunks := c.Size()
		if bytes == 0 && chunks == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d chunks (%d bytes) still kept 10 s after the only list", chunks, bytes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The cache still serves lists afterwards.
	checkList(t, c, l)
}

// The chunks cost little against compressing the whole list at once.
func TestChunksCompressNearlyAsWellAsOneStream(t *testing.T) {
	l := newTestItems(10000)
	body := write(t, NewChunks(), l)
	var whole bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&whole, Level)
	zw.Write([]byte("["))
	zw.Write(l.plain())
	zw.Write([]byte("]"))
	zw.Close()
	t.Logf("%d items, %d bytes: chunks %d bytes, one stream %d", len(l.keys), len(l.plain()), len(body), whole.Len())
	if float64(len(body)) > 1.25*float64(whole.Len()) {
		t.Errorf("chunked body %d bytes, more than 1.25 times the one stream's %d", len(body), whole.Len())
	}
}

func BenchmarkListFromChunks(b *testing.B) {
	l := newTestItems(10000)
	c := NewChunks()
	b.SetBytes(int64(len(l.plain())))
	for b.Loop() {
		s := newStream(io.Discard)
		c.Write(s, l)
		s.Close()
	}
}

func BenchmarkListCompressed(b *testing.B) {
	l := newTestItems(10000)
	p := l.plain()
	b.SetBytes(int64(len(p)))
	zw, _ := gzip.NewWriterLevel(io.Discard, Level)
	for b.Loop() {
		zw.Reset(io.Discard)
		zw.Write(p)
		zw.Close()
	}
}

// Items changing between lists leave chunks no list finds again; the cache holds no
// more than about twice what a list is written from.
func TestChunksLeftBehindByChangesAreBounded(t *testing.T) {
	c := NewChunks()
	l := newTestItems(4000)
	checkList(t, c, l)
	first, _ := c.Size()
	for round := range 30 {
		// Every item changes: each list is written from new chunks only.
		for i := range l.keys {
			l.revs[i] += 10000
			l.bodies[l.keys[i]] = podLike(fmt.Sprint(l.keys[i], round), l.revs[i])
		}
		checkList(t, c, l)
	}
	if now, _ := c.Size(); now > 2*first+boundSlack {
		t.Errorf("after 30 lists of changed items the cache holds %d bytes; one list's chunks are %d", now, first)
	}
}
