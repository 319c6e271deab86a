package conformance

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"

	"revd/tests/testutil"
)

var (
	watchOpsFlag     = flag.Int("watchops", 1500, "number of writes in TestWatchRandomWorkload")
	watchCompactFlag = flag.Bool("watchcompact", true, "compact (physically) at 3/4 of TestWatchRandomWorkload's writes")
)

// watchShape is what a watch watches.
type watchShape struct {
	name     string
	key, end []byte
}

// watchShapes covers single keys, prefixes, ranges and from-key watches
// over the workload's key alphabet (Keys), including the edge bytes.
func watchShapes() []watchShape {
	return []watchShape{
		{"key a", b("a"), nil},
		{"key a/1", b("a/1"), nil},
		{`key \x00`, []byte{0}, nil},
		{`key \xff\xff`, b("\xff\xff"), nil},
		{`empty key (watches \x00)`, nil, nil},
		{"key never written", b("zz"), nil},
		{"prefix a/", b("a/"), PrefixEnd(b("a/"))},
		{"prefix a", b("a"), PrefixEnd(b("a"))},
		{"prefix b/", b("b/"), PrefixEnd(b("b/"))},
		{`prefix \xff (from-key end)`, b("\xff"), PrefixEnd(b("\xff"))},
		{"range [a, b)", b("a"), b("b")},
		{"range [a/2, c)", b("a/2"), b("c")},
		{`range [\x00, a)`, []byte{0}, b("a")},
		{"range [b, b/y)", b("b"), b("b/y")},
		{"from key b", b("b"), []byte{0}},
		{"everything (empty key, from-key)", nil, []byte{0}},
		{`everything (\x00, from-key)`, []byte{0}, []byte{0}},
	}
}

// watchVariety returns two watches per shape, starting at start (0: the
// next revision): with and without prev_kv, with a NOPUT or NODELETE
// filter or none, some asking for fragments; and one with both filters
// (which must never see an event).
func watchVariety(start int64) []*pb.WatchCreateRequest {
	noPut, noDel := pb.WatchCreateRequest_NOPUT, pb.WatchCreateRequest_NODELETE
	var out []*pb.WatchCreateRequest
	for i, s := range watchShapes() {
		out = append(out, &pb.WatchCreateRequest{Key: s.key, RangeEnd: s.end, StartRevision: start, PrevKv: i%2 == 0})
		v := &pb.WatchCreateRequest{Key: s.key, RangeEnd: s.end, StartRevision: start, PrevKv: i%2 == 1}
		switch i % 4 {
		case 0, 2:
			v.Filters = []pb.WatchCreateRequest_FilterType{noPut}
		case 1:
			v.Filters = []pb.WatchCreateRequest_FilterType{noDel}
		case 3:
			v.Fragment = true
		}
		out = append(out, v)
	}
	out = append(out, &pb.WatchCreateRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: start, PrevKv: true,
		Filters: []pb.WatchCreateRequest_FilterType{noPut, noDel}})
	return out
}

func describeWatch(cr *pb.WatchCreateRequest) string {
	var parts []string
	parts = append(parts, fmt.Sprintf("key=%q", cr.Key))
	if cr.RangeEnd != nil {
		parts = append(parts, fmt.Sprintf("range_end=%q", cr.RangeEnd))
	}
	if cr.StartRevision != 0 {
		parts = append(parts, fmt.Sprintf("start=%d", cr.StartRevision))
	}
	if cr.PrevKv {
		parts = append(parts, "prev_kv")
	}
	for _, f := range cr.Filters {
		parts = append(parts, f.String())
	}
	if cr.Fragment {
		parts = append(parts, "fragment")
	}
	if cr.WatchId != 0 {
		parts = append(parts, fmt.Sprintf("watch_id=%d", cr.WatchId))
	}
	return strings.Join(parts, " ")
}

// pairedWatch is one watch created alike on both servers.
type pairedWatch struct {
	label  string
	req    *pb.WatchCreateRequest
	stream int
	id     int64 // etcd's watch id
	tgtID  int64 // the target's (the same unless the created responses differ)
	// canceledAtCreate: the created response also canceled the watch.
	canceledAtCreate bool
}

// watchSet is a group of watch streams, the same on both servers.
type watchSet struct {
	h        *Harness
	name     string
	ref, tgt []*WatchStream
	watches  []*pairedWatch
}

func newWatchSet(h *Harness, name string, streams int) *watchSet {
	h.T.Helper()
	s := &watchSet{h: h, name: name}
	for i := range streams {
		s.ref = append(s.ref, OpenWatch(h.T, fmt.Sprintf("%s: %s stream %d", h.Ref.Name, name, i), h.Ref.Clients.Watch))
		s.tgt = append(s.tgt, OpenWatch(h.T, fmt.Sprintf("%s: %s stream %d", h.Target.Name, name, i), h.Target.Clients.Watch))
	}
	return s
}

func (h *Harness) seedNote() string {
	if h.Seed == 0 {
		return ""
	}
	return fmt.Sprintf(" (seed %d, reproduce: go test ./tests/conformance -run %s -seed=%d -watchops=%d -watchcompact=%v)",
		h.Seed, h.T.Name(), h.Seed, *watchOpsFlag, *watchCompactFlag)
}

// create opens each watch on both servers (round-robin over the set's
// streams), one at a time, and requires identical created responses.
func (s *watchSet) create(reqs []*pb.WatchCreateRequest) []*pairedWatch {
	h := s.h
	h.T.Helper()
	var out []*pairedWatch
	for _, cr := range reqs {
		i := len(s.watches) % len(s.ref)
		w := &pairedWatch{label: fmt.Sprintf("%s watch #%d on stream %d [%s]", s.name, len(s.watches), i, describeWatch(cr)), req: cr, stream: i}
		want := s.ref[i].Create(h.T, cr)
		got := s.tgt[i].Create(h.T, cr)
		if diff := h.CompareWatchResponses(want, got); diff != "" {
			h.T.Errorf("MISMATCH in the created response of %s%s:\n%s\n%s sent %s\n%s sent %s",
				w.label, h.seedNote(), diff, h.Ref.Name, oneLine(want), h.Target.Name, oneLine(got))
		}
		w.id, w.tgtID = want.WatchId, got.WatchId
		w.canceledAtCreate = want.Canceled
		s.watches = append(s.watches, w)
		out = append(out, w)
	}
	return out
}

// sync waits until every stream of the set, on both servers, answers a
// progress request at revision rev or later (so every event up to it has
// arrived) and requires the same progress responses.
func (s *watchSet) sync(rev int64) {
	h := s.h
	h.T.Helper()
	for i := range s.ref {
		want := s.ref[i].Sync(h.T, rev)
		got := s.tgt[i].Sync(h.T, rev)
		if diff := h.CompareWatchResponses(want, got); diff != "" {
			h.T.Errorf("MISMATCH in the progress response of %s stream %d%s:\n%s", s.name, i, h.seedNote(), diff)
		}
	}
}

// compare requires that every watch of the set saw, on both servers, the
// same events revision by revision, and the same canceled response, and
// that the target's streams kept the watch guarantees.
func (s *watchSet) compare() {
	h := s.h
	h.T.Helper()
	bad := 0
	for _, w := range s.watches {
		want, got := s.ref[w.stream].Log(w.id), s.tgt[w.stream].Log(w.tgtID)
		for _, p := range want.Problems {
			h.T.Logf("note: %s broke a watch guarantee on %s: %s", h.Ref.Name, w.label, p)
		}
		var diffs []string
		for _, p := range got.Problems {
			diffs = append(diffs, "broken guarantee: "+p)
		}
		if d := compareRevs(h, want.Revs, got.Revs); d != "" {
			diffs = append(diffs, d)
		}
		if d := h.CompareWatchResponses(want.Canceled, got.Canceled); d != "" {
			diffs = append(diffs, "canceled response: "+d)
		}
		if len(want.Other) != len(got.Other) {
			diffs = append(diffs, fmt.Sprintf("%d responses without events from %s, %d from %s:\n  %s\n  %s",
				len(want.Other), h.Ref.Name, len(got.Other), h.Target.Name, oneLines(want.Other), oneLines(got.Other)))
		}
		if len(diffs) == 0 {
			continue
		}
		bad++
		if bad <= 5 {
			h.T.Errorf("MISMATCH on %s%s:\n%s", w.label, h.seedNote(), strings.Join(diffs, "\n"))
		}
	}
	if bad > 5 {
		h.T.Errorf("... and %d more watches of %s differ", bad-5, s.name)
	}
}

// cancelAll cancels every watch still open and requires identical
// canceled responses.
func (s *watchSet) cancelAll() {
	h := s.h
	h.T.Helper()
	for _, w := range s.watches {
		if w.canceledAtCreate {
			continue
		}
		want := s.ref[w.stream].Cancel(h.T, w.id)
		got := s.tgt[w.stream].Cancel(h.T, w.tgtID)
		if diff := h.CompareWatchResponses(want, got); diff != "" {
			h.T.Errorf("MISMATCH in the cancel response of %s%s:\n%s", w.label, h.seedNote(), diff)
		}
	}
}

func oneLines(rs []*pb.WatchResponse) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, oneLine(r))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// compareRevs compares two watches' events revision by revision; "" when
// equal.
func compareRevs(h *Harness, want, got []RevEvents) string {
	for i := 0; i < max(len(want), len(got)); i++ {
		var w, g *RevEvents
		if i < len(want) {
			w = &want[i]
		}
		if i < len(got) {
			g = &got[i]
		}
		if w != nil && g != nil && w.Rev == g.Rev && eventsEqual(w.Events, g.Events) {
			continue
		}
		return fmt.Sprintf("first difference at the watch's revision #%d (%d revisions from %s, %d from %s):\n  %s: %s\n  %s: %s",
			i, len(want), h.Ref.Name, len(got), h.Target.Name, h.Ref.Name, revText(w), h.Target.Name, revText(g))
	}
	return ""
}

func eventsEqual(a, b []*mvccpb.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func revText(r *RevEvents) string {
	if r == nil {
		return "<nothing>"
	}
	var parts []string
	for _, ev := range r.Events {
		parts = append(parts, shortLine(ev))
	}
	return clip(fmt.Sprintf("revision %d: [%s]", r.Rev, strings.Join(parts, ", ")))
}

// TestWatchRandomWorkload is the differential watch test. Live watches of
// every kind (watchVariety) are opened on a fresh etcd 3.7.3 and a fresh
// target before a seeded random workload of Put, DeleteRange and Txn
// (several keys per Txn); halfway, the same variety is opened from
// revision 2, catching up while the writes go on; at 3/4 the store is
// compacted (-watchcompact); after the workload the variety is opened
// again from the first revision still available, and a few watches from
// below the compaction. Every watch must receive exactly etcd's events
// (type, kv, prev_kv), revision by revision; created, progress and cancel
// responses must be identical. Response boundaries are not compared.
func TestWatchRandomWorkload(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	h := NewHarness(t, testutil.Options{})
	h.Seed = seed
	t.Logf("seed%s", h.seedNote())
	g := NewGen(seed)

	live := newWatchSet(h, "live", 3)
	live.create(watchVariety(0))

	var catchUp *watchSet
	compactRev := int64(0)
	ops := *watchOpsFlag
	for i := 0; i < ops; {
		req := g.Next()
		switch req.(type) {
		case *pb.RangeRequest, *pb.CompactionRequest:
			continue
		}
		g.Observe(req, h.Do(fmt.Sprintf("op %d", i), req))
		i++
		switch {
		case i == ops/2:
			catchUp = newWatchSet(h, "catch-up", 2)
			catchUp.create(watchVariety(2))
		case i == 3*ops/4 && catchUp != nil && *watchCompactFlag && g.Rev > 30:
			// Every catch-up watch must be synced first: a compaction
			// racing with its catch-up would cancel it on one server only.
			catchUp.sync(g.Rev)
			compactRev = g.Rev - 25
			g.Observe(compact(compactRev, true), h.Do(fmt.Sprintf("compact at revision %d", compactRev), compact(compactRev, true)))
		}
	}
	h.LogStats()
	final := g.Rev
	t.Logf("store at revision %d, compacted at %d", final, compactRev)

	first := max(compactRev, 2)
	hist := newWatchSet(h, fmt.Sprintf("historical (from %d)", first), 2)
	hist.create(watchVariety(first))
	later := newWatchSet(h, "historical (from later revisions)", 1)
	for _, start := range []int64{first + 1, (first + final) / 2, final} {
		later.create([]*pb.WatchCreateRequest{
			{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: start, PrevKv: true},
			{Key: b("a"), RangeEnd: PrefixEnd(b("a")), StartRevision: start},
		})
	}
	var compacted *watchSet
	if compactRev > 2 {
		// Their stream gets no progress responses in etcd (a compacted
		// watcher is never synced), so they wait for their cancel.
		compacted = newWatchSet(h, "below the compaction", 1)
		for _, start := range []int64{1, 2, compactRev - 1} {
			compacted.create([]*pb.WatchCreateRequest{
				{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: start, PrevKv: true},
				{Key: b("a"), StartRevision: start},
			})
		}
	}

	for _, s := range []*watchSet{live, catchUp, hist, later} {
		if s != nil {
			s.sync(final)
		}
	}
	if compacted != nil {
		for _, w := range compacted.watches {
			compacted.awaitCancel(w)
		}
	}
	for _, s := range []*watchSet{catchUp, hist, later, compacted} {
		if s != nil {
			s.compare()
		}
	}
	live.cancelAll()
	live.compare() // with the cancel responses
}

// The scenarios below pin down watch cases the random workload does not
// reach; each runs on a fresh pair of servers and waits for every
// response before the next step, so that whole streams can be compared.

// both runs f on the reference's and the target's stream i.
func (s *watchSet) both(i int, f func(*WatchStream)) {
	f(s.ref[i])
	f(s.tgt[i])
}

// awaitRev waits on both servers until watch w has received the events
// of revision rev (or a later one).
func (s *watchSet) awaitRev(w *pairedWatch, rev int64) {
	s.h.T.Helper()
	for _, side := range []struct {
		ws *WatchStream
		id int64
	}{{s.ref[w.stream], w.id}, {s.tgt[w.stream], w.tgtID}} {
		if !side.ws.Await(WatchWait, func(rs []*pb.WatchResponse) bool {
			l := LogOf(rs, side.id)
			return len(l.Revs) > 0 && l.Revs[len(l.Revs)-1].Rev >= rev
		}) {
			s.h.T.Fatalf("%s: %s got no events up to revision %d within %v%s; responses:\n%s", side.ws.Name, w.label, rev, WatchWait, s.h.seedNote(), side.ws.Dump(0))
		}
	}
}

// awaitCancel waits on both servers for the canceled response of watch w.
func (s *watchSet) awaitCancel(w *pairedWatch) {
	s.h.T.Helper()
	s.ref[w.stream].Next(s.h.T, "cancel of "+w.label, 0, func(r *pb.WatchResponse) bool { return r.WatchId == w.id && r.Canceled })
	s.tgt[w.stream].Next(s.h.T, "cancel of "+w.label, 0, func(r *pb.WatchResponse) bool { return r.WatchId == w.tgtID && r.Canceled })
}

// compareSeq requires the same sequence of responses on stream i of both
// servers (after normalizing headers; fragments are compared as sent).
// Responses that etcd may send in either order (those of several watches
// for one revision) are put in watch id order first.
func (s *watchSet) compareSeq(label string, i int) {
	h := s.h
	h.T.Helper()
	want, got := canonicalOrder(s.ref[i].Responses()), canonicalOrder(s.tgt[i].Responses())
	for j := 0; j < max(len(want), len(got)); j++ {
		var w, g *pb.WatchResponse
		if j < len(want) {
			w = want[j]
		}
		if j < len(got) {
			g = got[j]
		}
		if d := h.CompareWatchResponses(w, g); d != "" {
			h.T.Errorf("MISMATCH %s%s: response #%d of stream %d differs:\n%s\nwhole stream from %s:\n%s\nwhole stream from %s:\n%s",
				label, h.seedNote(), j, i, d, h.Ref.Name, dumpResps(want), h.Target.Name, dumpResps(got))
			return
		}
	}
}

// compareTail is compareSeq over the responses from index fromRef (on the
// reference) and fromTgt (on the target) on.
func (s *watchSet) compareTail(label string, i, fromRef, fromTgt int) {
	h := s.h
	h.T.Helper()
	want, got := canonicalOrder(s.ref[i].Responses()[fromRef:]), canonicalOrder(s.tgt[i].Responses()[fromTgt:])
	for j := 0; j < max(len(want), len(got)); j++ {
		var w, g *pb.WatchResponse
		if j < len(want) {
			w = want[j]
		}
		if j < len(got) {
			g = got[j]
		}
		if d := h.CompareWatchResponses(w, g); d != "" {
			h.T.Errorf("MISMATCH %s: response #%d of stream %d (counting from the step) differs:\n%s\nstream from %s:\n%s\nstream from %s:\n%s",
				label, j, i, d, h.Ref.Name, dumpResps(want), h.Target.Name, dumpResps(got))
			return
		}
	}
}

// canonicalOrder sorts each run of event responses with the same header
// revision (one revision delivered to several watches) by watch id.
func canonicalOrder(rs []*pb.WatchResponse) []*pb.WatchResponse {
	out := append([]*pb.WatchResponse(nil), rs...)
	isEvent := func(r *pb.WatchResponse) bool { return len(r.Events) > 0 && !r.Created && !r.Canceled }
	for i := 0; i < len(out); {
		j := i + 1
		if isEvent(out[i]) {
			for j < len(out) && isEvent(out[j]) && out[j].Header.GetRevision() == out[i].Header.GetRevision() {
				j++
			}
			slices.SortStableFunc(out[i:j], func(a, b *pb.WatchResponse) int { return cmp.Compare(a.WatchId, b.WatchId) })
		}
		i = j
	}
	return out
}

func dumpResps(rs []*pb.WatchResponse) string {
	var b strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&b, "  #%d %s\n", i, shortLine(r))
	}
	return clip(b.String())
}

// TestWatchCompaction: watches that start below, at and above a compaction
// revision, after it. Below: created, then canceled with compact_revision
// (etcd sends that cancel with header revision 0). At the compaction
// revision: etcd still has that revision's events, in operation order,
// deletes included (a tombstone at the compaction revision is kept), with
// no prev_kv (the revision before is gone). A live watch keeps going across
// the compaction.
func TestWatchCompaction(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	s := newWatchSet(h, "live across the compaction", 1)
	live := s.create([]*pb.WatchCreateRequest{{Key: []byte{0}, RangeEnd: []byte{0}, PrevKv: true}})[0]
	run(h, []step{
		{"put c", put("c", "c1")},       // 2
		{"put a", put("a", "a1")},       // 3
		{"put b", put("b", "b1")},       // 4
		{"put d", put("d", "d1")},       // 5
		{"put a again", put("a", "a2")}, // 6
		{"txn: put z, put b, delete c, put a/1", txn(nil, ops(opPut(put("z", "z1")), opPut(put("b", "b2")), opDel(del("c")), opPut(put("a/1", "x"))), nil)}, // 7
		{"delete d", del("d")}, // 8
		{"compact at 7", compact(7, true)},
		{"put e after the compaction", put("e", "e1")}, // 9
	})
	s.awaitRev(live, 9)
	// etcd answers no progress request on a stream holding a compacted
	// watcher, so the watches below the compaction get a set of their own.
	below := newWatchSet(h, "below the compaction", 1)
	above := newWatchSet(h, "at and above the compaction", 2)
	for _, start := range []int64{1, 2, 6, 7, 8, 9, 10} {
		set := above
		if start < 7 {
			set = below
		}
		set.create([]*pb.WatchCreateRequest{
			{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: start, PrevKv: true},
			{Key: b("a"), RangeEnd: b("z"), StartRevision: start},
		})
	}
	h.Do("put f", put("f", "f1")) // 10
	s.sync(10)
	above.sync(10)
	for _, w := range below.watches {
		below.awaitCancel(w)
	}
	for _, set := range []*watchSet{s, above, below} {
		set.compare()
	}
	// In etcd a watch canceled by the compaction still holds its id until
	// the client cancels it: that cancel is answered, and the id is taken
	// until then.
	w0 := below.watches[0]
	nref, ntgt := below.ref[0].Len(), below.tgt[0].Len()
	below.both(0, func(ws *WatchStream) {
		ws.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: w0.id}}})
	})
	w1 := below.watches[1]
	reuse := below.create([]*pb.WatchCreateRequest{{Key: b("e"), WatchId: w1.id}})[0]
	h.Do("put e", put("e", "e2")) // 11
	if !reuse.canceledAtCreate {
		below.awaitRev(reuse, 11)
	}
	below.compareTail("cancel and id reuse after the compaction cancel", 0, nref, ntgt)
}

// TestWatchFutureAndProgress: a watch starting at a future revision sees
// nothing before it; progress requests are answered with watch id -1 and
// the current revision, but etcd does not answer one while a watch of the
// stream waits for a future revision, nor on a stream without watches.
func TestWatchFutureAndProgress(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	run(h, []step{{"put x", put("x", "1")}, {"put y", put("y", "1")}}) // 2, 3
	s := newWatchSet(h, "future", 1)
	ws := s.create([]*pb.WatchCreateRequest{
		{Key: b("x")},
		{Key: b("k"), StartRevision: 6},
		{Key: b("k"), RangeEnd: PrefixEnd(b("k")), StartRevision: 6, PrevKv: true},
	})
	x, k, kp := ws[0], ws[1], ws[2]
	// etcd: not answered (a watcher waits for revision 6); the event of
	// revision 4 comes after anything sent for the request.
	s.both(0, func(w *WatchStream) { w.RequestProgress(t) })
	h.Do("put x", put("x", "2")) // 4
	s.awaitRev(x, 4)
	run(h, []step{
		{"put k", put("k", "1")},     // 5: before the watches' start
		{"put k", put("k", "2")},     // 6
		{"put k/1", put("k/1", "1")}, // 7
		{"delete k", del("k")},       // 8
	})
	s.awaitRev(k, 8)
	s.awaitRev(kp, 8)
	// Now every watcher is synced: answered with revision 8.
	s.sync(8)
	s.compareSeq("future start and progress", 0)
	s.compare()

	// A stream without watches: etcd answers no progress request.
	e := newWatchSet(h, "no watches", 1)
	e.both(0, func(w *WatchStream) { w.RequestProgress(t) })
	y := e.create([]*pb.WatchCreateRequest{{Key: b("y")}})[0]
	h.Do("put y", put("y", "2")) // 9
	e.awaitRev(y, 9)
	e.compareSeq("progress request on a stream without watches", 0)

	// Right after a write, the progress response carries the write's
	// revision (or a later one): etcd's store revision.
	for i := range 200 {
		a := h.Do(fmt.Sprintf("put y #%d", i), put("y", fmt.Sprint(i)))
		rev := a.Resp.(*pb.PutResponse).Header.Revision
		var resp [2]*pb.WatchResponse
		for j, w := range []*WatchStream{e.ref[0], e.tgt[0]} {
			from := w.Len()
			w.RequestProgress(t)
			_, resp[j] = w.Next(t, "progress response", from, func(r *pb.WatchResponse) bool { return r.WatchId == -1 })
		}
		if d := h.CompareWatchResponses(resp[0], resp[1]); d != "" {
			t.Fatalf("MISMATCH in the progress response requested right after the put at revision %d:\n%s", rev, d)
		}
	}
}

// TestWatchCreateRequests: client-chosen watch ids (a duplicate is
// refused, as etcd does, with watch id -1), automatic ids skipping taken
// ones, a cancel of an unknown id (no answer), the reuse of a canceled id,
// and create requests etcd refuses (empty range, negative start).
func TestWatchCreateRequests(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	s := newWatchSet(h, "ids", 1)
	s.create([]*pb.WatchCreateRequest{
		{Key: b("a"), WatchId: 7},
		{Key: b("b"), WatchId: 7}, // duplicate
		{Key: b("c")},             // auto: 0
		{Key: b("c"), WatchId: 1},
		{Key: b("d")},             // auto: skips 1
		{Key: b("e"), WatchId: 2}, // duplicate of an automatic id
		{Key: b("a"), RangeEnd: b("a")},
		{Key: b("b"), RangeEnd: b("a")},
		{Key: b("a"), StartRevision: -1},
		{Key: b("a"), StartRevision: -100, WatchId: 9},
	})
	s.both(0, func(w *WatchStream) {
		w.Send(t, &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: 99}}})
	})
	s.both(0, func(w *WatchStream) { w.Cancel(t, 7) })
	g := s.create([]*pb.WatchCreateRequest{{Key: b("g"), WatchId: 7}})[0] // reuse
	run(h, []step{{"put a", put("a", "1")}, {"put c", put("c", "1")}, {"put g", put("g", "1")}})
	s.awaitRev(g, 4)
	s.sync(4)
	s.compareSeq("watch ids and refused creates", 0)
}

// TestWatchFragment: etcd splits the responses of watches that asked for
// fragments when they reach --max-request-bytes + 512 KiB (its gRPC
// overhead allowance), so with --max-request-bytes 10000 a delete of 80
// values of 8000 bytes (about 650 kB of prev_kv in one revision) is sent in
// fragments. Reassembled, every watch must see etcd's events; each of the
// target's fragments must be as etcd builds them: below the limit unless a
// single event, and full (the next event would have reached the limit).
func TestWatchFragment(t *testing.T) {
	const limit = 10000
	const fragLimit = limit + 512*1024 // etcd's MaxRequestBytesWithOverhead
	h := NewHarness(t, testutil.Options{MaxRequestBytes: limit})
	s := newWatchSet(h, "fragment", 1)
	prefix := func(cr *pb.WatchCreateRequest) *pb.WatchCreateRequest {
		cr.Key, cr.RangeEnd = b("f/"), PrefixEnd(b("f/"))
		return cr
	}
	ws := s.create([]*pb.WatchCreateRequest{
		prefix(&pb.WatchCreateRequest{Fragment: true, PrevKv: true}),
		prefix(&pb.WatchCreateRequest{Fragment: true}),
		prefix(&pb.WatchCreateRequest{PrevKv: true}),
		{Key: b("f/03"), Fragment: true, PrevKv: true},
	})
	for i := range 80 {
		h.Do(fmt.Sprintf("put f/%02d", i), put(fmt.Sprintf("f/%02d", i), strings.Repeat(string(rune('a'+i%26)), 8000))) // 2..81
	}
	h.Do("delete f/", &pb.DeleteRangeRequest{Key: b("f/"), RangeEnd: PrefixEnd(b("f/"))}) // 82
	for _, w := range ws {
		s.awaitRev(w, 82)
	}
	s.sync(82)
	s.compare()

	count := func(rs []*pb.WatchResponse) (n int) {
		for _, r := range rs {
			if r.Fragment {
				n++
			}
		}
		return n
	}
	ref, tgt := s.ref[0].Responses(), s.tgt[0].Responses()
	t.Logf("fragment responses: %d from %s, %d from %s", count(ref), h.Ref.Name, count(tgt), h.Target.Name)
	if count(ref) == 0 {
		t.Fatalf("%s sent no fragments: the scenario does not test what it should", h.Ref.Name)
	}
	if count(tgt) == 0 {
		t.Errorf("%s sent no fragments where %s sent %d", h.Target.Name, h.Ref.Name, count(ref))
	}
	for i, r := range tgt {
		if r.Fragment || (i > 0 && tgt[i-1].Fragment) {
			if len(r.Events) > 1 && proto.Size(r) >= fragLimit {
				t.Errorf("%s: fragment #%d has %d events and %d bytes, etcd's limit is %d", h.Target.Name, i, len(r.Events), proto.Size(r), fragLimit)
			}
		}
		if r.Fragment && i+1 < len(tgt) && len(tgt[i+1].Events) > 0 {
			full := proto.Clone(r).(*pb.WatchResponse)
			full.Events = append(full.Events, tgt[i+1].Events[0])
			if proto.Size(full) < fragLimit {
				t.Errorf("%s: fragment #%d (%d events, %d bytes) could have taken the next event: etcd fills fragments up to %d bytes",
					h.Target.Name, i, len(r.Events), proto.Size(r), fragLimit)
				break
			}
		}
	}
}

// TestWatchLargeRevision: one revision whose events (with prev_kv) total
// about 9.8 MB (a delete of 7 values of 1.4 MB) reaches every watch, as a
// whole or in fragments, with nothing written after it.
func TestWatchLargeRevision(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	s := newWatchSet(h, "large revision", 1)
	pre := func(cr *pb.WatchCreateRequest) *pb.WatchCreateRequest {
		cr.Key, cr.RangeEnd = b("big/"), PrefixEnd(b("big/"))
		return cr
	}
	ws := s.create([]*pb.WatchCreateRequest{
		pre(&pb.WatchCreateRequest{Fragment: true, PrevKv: true}),
		pre(&pb.WatchCreateRequest{PrevKv: true}),
		pre(&pb.WatchCreateRequest{}),
	})
	val := strings.Repeat("v", 1400*1000)
	for i := range 7 {
		h.Do(fmt.Sprintf("put big/%d (1.4 MB)", i), put(fmt.Sprintf("big/%d", i), val)) // 2..8
	}
	for _, w := range ws {
		s.awaitRev(w, 8)
	}
	h.Do("delete big/ (9.8 MB of prev_kv)", &pb.DeleteRangeRequest{Key: b("big/"), RangeEnd: PrefixEnd(b("big/"))}) // 9
	for _, w := range ws {
		s.awaitRev(w, 9)
	}
	s.sync(9)
	s.compare()
}

// TestWatchKeyTwiceInOneRevision: etcd 3.7.3 accepts a Txn whose first
// nested txn puts a key and whose second nested txn deletes it (its
// duplicate-key check only looks back at earlier siblings' deletes), so
// one revision holds two events of one key. etcd looks prev_kv up at the
// revision before the event's, so both events carry the value the key had
// before the Txn; live and catch-up watches alike. The same for a key
// deleted and created again in one revision (a from-key delete and a put),
// except that a create event never carries prev_kv.
func TestWatchKeyTwiceInOneRevision(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	live := newWatchSet(h, "live", 1)
	lw := live.create([]*pb.WatchCreateRequest{
		{Key: b("c"), PrevKv: true},
		{Key: b("c")},
	})
	run(h, []step{
		{"put c", put("c", "c1")}, // 2
		{"txn: nested put c, nested delete c", txn(nil, ops(
			opTxn(txn(nil, ops(opPut(put("c", "c2"))), nil)),
			opTxn(txn(nil, ops(opDel(with(del("c"), func(r *pb.DeleteRangeRequest) { r.PrevKv = true }))), nil)),
		), nil)}, // 3
		{"put c again", put("c", "c3")}, // 4
		{"txn: nested put c with prev_kv, nested delete range [b, d)", txn(nil, ops(
			opTxn(txn(nil, ops(opPut(with(put("c", "c4"), func(r *pb.PutRequest) { r.PrevKv = true }))), nil)),
			opTxn(txn(nil, ops(opDel(delRange("b", "d"))), nil)),
		), nil)}, // 5
		{"put d", put("d", "d1")}, // 6
		// etcd's duplicate-key check misses from-key deletes (see
		// ETCD-FACTS.md): "d" is deleted and created again at revision 7;
		// its PUT is a create event (create == mod revision), which etcd
		// sends without prev_kv.
		{"txn: delete from c (from-key), put d", txn(nil, ops(
			opDel(&pb.DeleteRangeRequest{Key: b("c"), RangeEnd: []byte{0}}),
			opPut(put("d", "d2")),
		), nil)}, // 7
	})
	live.awaitRev(lw[0], 5)
	live.awaitRev(lw[1], 5)
	live.awaitRev(live.create([]*pb.WatchCreateRequest{{Key: b("d"), StartRevision: 6, PrevKv: true}})[0], 7)
	hist := newWatchSet(h, "catch-up", 1)
	hist.create([]*pb.WatchCreateRequest{
		{Key: b("c"), StartRevision: 2, PrevKv: true},
		{Key: b("a"), RangeEnd: b("z"), StartRevision: 3, PrevKv: true},
		{Key: b("d"), StartRevision: 2, PrevKv: true},
	})
	live.sync(7)
	hist.sync(7)
	live.compare()
	hist.compare()
}

// TestWatchCatchUpResponses: a watch that starts in the past gets its
// history in responses of up to 1000 revisions that have events for it
// (etcd's watchBatchMaxRevs), however far apart they lie, counted before
// filters: with k0001..k1100 put at revisions 2..1101, "a" at 1102 and
// k0001 deleted at 1103, ["a", "k0002") gets its three events in one
// response, the prefix "k" gets 2..1001 then 1002..1103, and a NOPUT watch
// of every key only the delete. Each watch has a stream of its own, and its
// responses must be etcd's, one for one.
func TestWatchCatchUpResponses(t *testing.T) {
	h := NewHarness(t, testutil.Options{})
	for i := 1; i <= 1100; i++ {
		h.Do(fmt.Sprintf("put k%04d", i), put(fmt.Sprintf("k%04d", i), "v"))
	}
	h.Do("put a", put("a", "1"))       // 1102
	h.Do("delete k0001", del("k0001")) // 1103
	for _, cr := range []*pb.WatchCreateRequest{
		{Key: b("a"), RangeEnd: b("k0002"), StartRevision: 1},
		{Key: b("k"), RangeEnd: b("l"), StartRevision: 1},
		{Key: b("k"), RangeEnd: b("l"), StartRevision: 600, PrevKv: true},
		{Key: b("\x00"), RangeEnd: b("\x00"), StartRevision: 1, Filters: []pb.WatchCreateRequest_FilterType{pb.WatchCreateRequest_NOPUT}},
	} {
		name := describeWatch(cr)
		var logs [2][]*pb.WatchResponse
		for i, srv := range []*Server{h.Ref, h.Target} {
			w := OpenWatch(t, srv.Name+" "+name, srv.Clients.Watch)
			w.Create(t, cr)
			if !w.Await(WatchWait, func(rs []*pb.WatchResponse) bool {
				last := rs[len(rs)-1]
				return len(last.Events) > 0 && last.Events[len(last.Events)-1].Kv.ModRevision == 1103
			}) {
				t.Fatalf("%s: %s sent no event of revision 1103:\n%s", name, srv.Name, w.Dump(0))
			}
			logs[i] = w.Responses()[1:]
			w.Close()
		}
		if len(logs[0]) != len(logs[1]) {
			t.Errorf("%s: %s sent %d responses, %s %d:\n%s\n%s", name, h.Ref.Name, len(logs[0]), h.Target.Name, len(logs[1]), oneLines(logs[0]), oneLines(logs[1]))
			continue
		}
		for i := range logs[0] {
			if d := h.CompareWatchResponses(logs[0][i], logs[1][i]); d != "" {
				t.Errorf("%s, response %d: %s", name, i, d)
			}
		}
	}
}
