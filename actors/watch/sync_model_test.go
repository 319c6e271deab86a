package watch

import (
	"bytes"
	"math/rand/v2"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

type nopSink struct{}

func (nopSink) Send(*pb.WatchResponse) error { return nil }

type modelW struct {
	w         *watcher
	got       []*mvccpb.Event
	revResp   map[int64]int // revision -> response index
	nresp     int
	compacted int64
	canceled  bool
}

func (m *modelW) expected(h *history) []*mvccpb.Event {
	var out []*mvccpb.Event
	for _, r := range h.recs {
		if r.Revision < m.w.start {
			continue
		}
		for _, ev := range r.Events {
			k := ev.Kv.Key
			in := false
			if m.w.end == nil {
				in = bytes.Equal(k, m.w.key)
			} else {
				in = bytes.Compare(k, m.w.key) >= 0 && (len(m.w.end) == 0 || bytes.Compare(k, m.w.end) < 0)
			}
			if in && m.w.wants(ev) {
				out = append(out, ev)
			}
		}
	}
	return out
}

func runModel(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	hist := &history{}
	h := NewHub(HubOptions{History: hist, Rev: 1, CompactRev: -1,
		MaxRevsPerSync: int64(1 + r.IntN(5)), MaxRevsPerResponse: 1 + r.IntN(4), MaxWatchersPerSync: 1 + r.IntN(4)})
	s := NewStream(StreamOptions{Sink: nopSink{}, Rev: func() int64 { return h.rev }, HubRev: h.Rev, MaxPendingEvents: int64(1 + r.IntN(6))})
	defer s.Close()
	ws := map[int64]*modelW{}
	keys := []string{"a", "b", "c", "d"}
	var nextID int64
	drain := func(n int) {
		s.mu.Lock()
		k := min(n, len(s.queue))
		items := append([]item(nil), s.queue[:k]...)
		s.queue = s.queue[k:]
		s.release(items)
		s.mu.Unlock()
		for _, it := range items {
			m := ws[it.resp.WatchId]
			if m == nil || m.canceled {
				continue
			}
			if m.compacted != 0 {
				t.Fatalf("seed %d: response after compaction for %d", seed, it.resp.WatchId)
			}
			if it.resp.CompactRevision != 0 {
				m.compacted = it.resp.CompactRevision
				continue
			}
			m.nresp++
			revs := map[int64]bool{}
			for _, ev := range it.resp.Events {
				rv := ev.Kv.ModRevision
				if rv > it.resp.Header.Revision {
					t.Fatalf("seed %d: event %d above header %d", seed, rv, it.resp.Header.Revision)
				}
				if i, ok := m.revResp[rv]; ok && i != m.nresp {
					t.Fatalf("seed %d: watcher %d revision %d split across responses", seed, m.w.id, rv)
				}
				m.revResp[rv] = m.nresp
				revs[rv] = true
				m.got = append(m.got, ev)
			}
			if len(revs) > h.opts.MaxRevsPerResponse {
				t.Fatalf("seed %d: %d revisions in one response", seed, len(revs))
			}
		}
	}
	for step := 0; step < 300; step++ {
		switch op := r.IntN(10); {
		case op < 3:
			var ops []string
			for range 1 + r.IntN(3) {
				k := keys[r.IntN(len(keys))]
				if r.IntN(3) == 0 {
					ops = append(ops, "-"+k)
				} else {
					ops = append(ops, k+"=v")
				}
			}
			h.onCommit(hist.add(ops...))
		case op < 5:
			h.syncRound()
		case op < 7:
			drain(r.IntN(3))
		case op == 7:
			cr := &pb.WatchCreateRequest{Key: []byte(keys[r.IntN(len(keys))])}
			if r.IntN(2) == 0 {
				cr.RangeEnd = []byte(keys[r.IntN(len(keys))] + "z")
				if bytes.Compare(cr.Key, cr.RangeEnd) >= 0 {
					cr.RangeEnd = nil
				}
			}
			switch r.IntN(4) {
			case 0:
				cr.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}
			case 1:
				cr.Filters = []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NODELETE}
			}
			start := 1 + r.Int64N(h.rev+1)
			cr.StartRevision = start
			w := newWatcher(s, nextID, cr, start)
			ws[nextID] = &modelW{w: w, revResp: map[int64]int{}}
			nextID++
			h.onRegister(w)
		case op == 8 && r.IntN(4) == 0:
			if len(ws) > 0 {
				m := ws[r.Int64N(nextID)]
				if !m.canceled {
					m.canceled = true
					m.w.canceled.Store(true)
					h.remove(m.w)
				}
			}
		case op == 9 && r.IntN(6) == 0:
			h.onCommit(&Commit{CompactRev: max(h.compactRev, 1+r.Int64N(h.rev))})
		}
	}
	for i := 0; i < 10000 && (len(h.unsynced) > 0 || len(s.queue) > 0); i++ {
		drain(1000)
		h.syncRound()
	}
	drain(1000)
	if len(h.unsynced) > 0 {
		t.Fatalf("seed %d: %d watchers never synced", seed, len(h.unsynced))
	}
	for id, m := range ws {
		want := m.expected(hist)
		got := m.got
		full := !m.canceled && m.compacted == 0
		if len(got) > len(want) || (full && len(got) != len(want)) {
			t.Fatalf("seed %d watcher %d (start %d compacted %d canceled %v): got %d events, want %d\n got %s\nwant %s", seed, id, m.w.start, m.compacted, m.canceled, len(got), len(want), fmtEvs(got), fmtEvs(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("seed %d watcher %d: event %d differs\n got %s\nwant %s", seed, id, i, fmtEvs(got), fmtEvs(want))
			}
		}
	}
}

func fmtEvs(es []*mvccpb.Event) string { return evs(&pb.WatchResponse{Events: es}) }

// TestSyncModel drives a hub and a stream directly (no actors), with random
// commits, sync rounds, partial drains of a tiny stream (so that offers are
// refused and watchers fall behind), watches with ranges, filters and past
// starts, cancels and compactions, and tiny bounds on rounds and responses.
// Every watcher must get exactly the events of its keys from its start (a
// prefix of them if canceled or compacted), in order, each revision in one
// response, at most MaxRevsPerResponse revisions a response, and no event
// above its response's header.
func TestSyncModel(t *testing.T) {
	for seed := uint64(0); seed < 1000; seed++ {
		runModel(t, seed)
	}
}
