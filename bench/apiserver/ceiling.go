package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"mizzen/bench/internal/benchutil"
	"mizzen/internal/etcd"
)

// etcdCeiling is the rate of the apiserver's create writes against the store alone: an
// etcd member started as `mizzen server` starts its embedded one (internal/etcd, in this
// process, with its in-process client), and workers goroutines each writing the next of
// n keys of size bytes in the transaction the apiserver's create uses (put if the key's
// mod revision is 0). It is the ceiling of pod creates through the apiserver.
func etcdCeiling(n, workers, size int) (perSecond, p50ms float64, err error) {
	dir, err := os.MkdirTemp("", "mizzen-bench-etcd-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	m, err := etcd.Start(ctx, etcd.MemberConfig{DataDir: dir}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return 0, 0, err
	}
	defer m.Close()
	client := m.Client()
	defer client.Close()
	value := strings.Repeat("x", size)
	var next atomic.Int64
	var failed atomic.Int64
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				key := fmt.Sprintf("/registry/pods/default/pod-%05d", i)
				s := time.Now()
				resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, value)).Commit()
				if err != nil || !resp.Succeeded {
					failed.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(s))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if f := failed.Load(); f > 0 {
		return 0, 0, fmt.Errorf("%d of %d writes failed", f, n)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return float64(n) / elapsed.Seconds(), ms(benchutil.Percentile(all, 0.5)), nil
}

// storedSize is the median size of a created pod (protobuf, with its managedFields)
// in mizzen's runs so far; what the apiserver stores is this plus a few bytes.
func storedSize(runs []figures) int {
	var v []float64
	for _, f := range runs {
		if b, ok := f.values["created pod, protobuf bytes"]; ok {
			v = append(v, b)
		}
	}
	if len(v) == 0 {
		return 1000
	}
	return int(benchutil.Median(v))
}
