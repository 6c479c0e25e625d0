package kubelet

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// runPLEG relists the runtime every RelistPeriod and pokes the worker of every pod whose
// sandboxes or containers changed state (the pod lifecycle event generator). Runtime
// objects of pods this kubelet has no worker for get one, which cleans them up if the
// pod is gone, or adopts them if it exists.
func (kl *Kubelet) runPLEG(ctx context.Context) {
	// Two maps, swapped after each relist and refilled: a relist every second on
	// every hollow node made a new one each time.
	last, next := map[string]uint64{}, map[string]uint64{}
	t := kl.clock.NewTicker(kl.opts.RelistPeriod)
	defer t.Stop()
	for {
		err := kl.relist(ctx, next)
		if err != nil {
			if ctx.Err() == nil {
				kl.log.Error("relisting runtime", "err", err)
			}
		} else {
			for uid, fp := range next {
				if last[uid] != fp || !kl.workers.has(types.UID(uid)) {
					kl.pokeOrAdopt(uid)
				}
			}
			for uid := range last {
				if _, ok := next[uid]; !ok {
					kl.workers.poke(types.UID(uid))
				}
			}
			last, next = next, last
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// relist fills out (emptied first) with a fingerprint of each pod's runtime state, by
// pod UID.
func (kl *Kubelet) relist(ctx context.Context, out map[string]uint64) error {
	clear(out)
	sbs, err := kl.runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	cs, err := kl.runtime.ListContainers(ctx, nil)
	if err != nil {
		return err
	}
	// Fingerprints are combined by addition so that list order does not matter.
	add := func(uid, id string, state int32) {
		if uid == "" {
			return
		}
		out[uid] += fingerprint(id, state)
	}
	for _, sb := range sbs {
		add(sb.Labels[labelPodUID], sb.Id, int32(sb.State))
	}
	for _, c := range cs {
		add(c.Labels[labelPodUID], c.Id, int32(c.State))
	}
	return nil
}

// fingerprint is the 64-bit FNV-1a hash of "<id>/<state>", computed without
// allocating: the relist takes one for every sandbox and container every second.
func fingerprint(id string, state int32) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * prime
	}
	var buf [12]byte
	for _, b := range strconv.AppendInt(append(buf[:0], '/'), int64(state), 10) {
		h = (h ^ uint64(b)) * prime
	}
	return h
}

// pokeOrAdopt pokes the worker of a pod seen in the runtime, starting one if the pod is
// in the watch cache or, if not, one that will clean its leftovers up.
func (kl *Kubelet) pokeOrAdopt(uid string) {
	if kl.workers.poke(types.UID(uid)) {
		return
	}
	key := ""
	for _, obj := range kl.podInformer.GetStore().List() {
		if p, ok := obj.(interface{ GetUID() types.UID }); ok && string(p.GetUID()) == uid {
			key = cacheKey(obj)
			break
		}
	}
	kl.workers.dispatch(types.UID(uid), key)
}
