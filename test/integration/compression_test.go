package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"mizzen/internal/testing/apiserver"
)

// TestResponseCompression: as upstream's apiserver, a response body over 128 KiB is
// gzipped for a client that accepts gzip (Content-Encoding: gzip, Vary:
// Accept-Encoding), smaller ones and watches are not, and a client that does not ask
// gets the same bytes uncompressed.
func TestResponseCompression(t *testing.T) {
	cfg := apiserver.Start(t)
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	// 40 ConfigMaps of 4 KiB: a list of about 170 KiB.
	for i := 0; i < 40; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}, Data: map[string]string{"d": strings.Repeat(fmt.Sprint(i%10), 4<<10)}}
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const list = "/api/v1/namespaces/default/configmaps"
	gunzip := func(t *testing.T, data []byte) []byte {
		t.Helper()
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("body is not gzip: %v", err)
		}
		out, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// sameList checks that path's list, gzipped, is the plain list, for both formats.
	sameList := func(t *testing.T, path string) {
		t.Helper()
		for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
			t.Run("list as "+accept, func(t *testing.T) {
				code, plain, h := rawRequest(t, cfg, "GET", path, "", nil, "Accept", accept, "Accept-Encoding", "identity")
				if code != 200 || h.Get("Content-Encoding") != "" || h.Get("Vary") != "" || len(plain) <= 128<<10 {
					t.Fatalf("without gzip: %d, headers %v, %d bytes", code, h, len(plain))
				}
				code, zipped, h := rawRequest(t, cfg, "GET", path, "", nil, "Accept", accept, "Accept-Encoding", "deflate, gzip")
				if code != 200 || h.Get("Content-Encoding") != "gzip" || h.Get("Vary") != "Accept-Encoding" || h.Get("Content-Type") != accept {
					t.Fatalf("with gzip: %d, headers %v", code, h)
				}
				if len(zipped) >= len(plain)/4 {
					t.Errorf("compressed %d bytes to %d", len(plain), len(zipped))
				}
				if got := gunzip(t, zipped); !bytes.Equal(got, plain) {
					t.Errorf("the compressed list (%d bytes) is not the plain one (%d bytes)", len(got), len(plain))
				}
			})
		}
	}
	sameList(t, list)
	sameList(t, list) // again: now from the items compressed by the first
	// The lists' runs of compressed items are kept: changed, deleted and new items
	// show in the gzipped list as in the plain one.
	t.Run("after changes", func(t *testing.T) {
		cm, err := c.CoreV1().ConfigMaps("default").Get(ctx, "cm-05", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["d"] = strings.Repeat("z", 5<<10)
		if _, err := c.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.CoreV1().ConfigMaps("default").Delete(ctx, "cm-20", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		added := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-10a", Labels: map[string]string{"added": "yes"}}, Data: map[string]string{"d": strings.Repeat("a", 4<<10)}}
		if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, added, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		sameList(t, list)
		sameList(t, "/api/v1/configmaps")
	})
	t.Run("client-go decompresses", func(t *testing.T) {
		got, err := c.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(got.Items) != 40 { // 40 made, one deleted, one added
			t.Fatalf("list: %v, %d items", err, len(got.Items))
		}
	})
	t.Run("list items do not name their kind", func(t *testing.T) {
		_, data, _ := rawRequest(t, cfg, "GET", list, "", nil, "Accept", "application/json")
		var l struct{ Items []map[string]any }
		if err := json.Unmarshal(data, &l); err != nil || len(l.Items) != 40 {
			t.Fatalf("%v, %d items", err, len(l.Items))
		}
		if k, ok := l.Items[0]["kind"]; ok {
			t.Errorf("item carries kind %v; upstream's list items do not", k)
		}
	})
	t.Run("small responses are not compressed", func(t *testing.T) {
		code, _, h := rawRequest(t, cfg, "GET", list+"/cm-01", "", nil, "Accept", "application/json", "Accept-Encoding", "gzip")
		if code != 200 || h.Get("Content-Encoding") != "" {
			t.Errorf("get: %d, headers %v", code, h)
		}
		code, _, h = rawRequest(t, cfg, "GET", list+"?limit=2", "", nil, "Accept", "application/json", "Accept-Encoding", "gzip")
		if code != 200 || h.Get("Content-Encoding") != "" {
			t.Errorf("page of 2: %d, headers %v", code, h)
		}
	})
	t.Run("watches are not compressed", func(t *testing.T) {
		// The initial events of 40 objects are more than 128 KiB; the watch ends by itself.
		code, data, h := rawRequest(t, cfg, "GET", list+"?watch=true&resourceVersion=0&timeoutSeconds=1", "", nil, "Accept", "application/json", "Accept-Encoding", "gzip")
		if code != 200 || h.Get("Content-Encoding") != "" || !bytes.HasPrefix(data, []byte(`{"type":"ADDED"`)) {
			t.Errorf("watch: %d, headers %v, body starts %.40q", code, h, data)
		}
	})
}
