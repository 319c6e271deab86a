package journal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func TestOpenFresh(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet", "there")
	j := openT(t, dir)
	m := j.Meta()
	if m.ClusterID == 0 || m.MemberID == 0 {
		t.Errorf("ids must be non-zero: %+v", m)
	}
	if m.ClusterID == m.MemberID {
		t.Errorf("cluster and member ids are equal: %+v", m)
	}
	want := Meta{ClusterID: m.ClusterID, MemberID: m.MemberID, Term: 2, LastRev: 1, Format: formatVersion, Commit: 1}
	if m != want {
		t.Errorf("Meta() = %+v, want %+v", m, want)
	}
	if got := j.BaseRev(); got != 0 {
		t.Errorf("BaseRev() = %d, want 0", got)
	}
	recs, err := collect(j.Records(0, 0))
	if err != nil || len(recs) != 0 {
		t.Errorf("Records of a fresh store = %v, %v; want none", revisions(recs), err)
	}
	base, err := collect(j.Base())
	if err != nil || len(base) != 0 {
		t.Errorf("Base of a fresh store = %v, %v; want none", base, err)
	}
	if j.Size() <= 0 {
		t.Errorf("Size() = %d, want > 0", j.Size())
	}
}

func TestReopenKeepsIDsAndBumpsTerm(t *testing.T) {
	dir := t.TempDir()
	j := openT(t, dir)
	first := j.Meta()
	closeT(t, j)
	for wantTerm := uint64(3); wantTerm <= 5; wantTerm++ {
		j := openT(t, dir)
		m := j.Meta()
		if m.ClusterID != first.ClusterID || m.MemberID != first.MemberID {
			t.Errorf("ids changed on reopen: %+v, first %+v", m, first)
		}
		if m.Term != wantTerm {
			t.Errorf("Term = %d, want %d", m.Term, wantTerm)
		}
		closeT(t, j)
	}
	// Another directory gets other ids.
	other := openT(t, t.TempDir()).Meta()
	if other.ClusterID == first.ClusterID || other.MemberID == first.MemberID {
		t.Errorf("two directories share ids: %+v and %+v", other, first)
	}
}

func TestCommitAndReopen(t *testing.T) {
	dir := t.TempDir()
	h := newHistory(1, 30)
	j := openT(t, dir)
	for chunk := range slices.Chunk(h.records, 7) {
		commitT(t, j, chunk...)
	}
	compactT(t, j, 12)
	want := withoutPrevKv(h.records)
	got, err := collect(j.Records(0, 0))
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	equalRecords(t, got, want)
	closeT(t, j)

	j = openT(t, dir)
	if m := j.Meta(); m.LastRev != 30 || m.CompactRev != 12 || m.BaseRev != 0 || m.Term != 3 {
		t.Errorf("Meta() after reopen = %+v, want LastRev 30, CompactRev 12, BaseRev 0, Term 3", m)
	}
	got, err = collect(j.Records(0, 0))
	if err != nil {
		t.Fatalf("Records after reopen: %v", err)
	}
	equalRecords(t, got, want)
	// The next revision is accepted, a repeated one is not.
	b := j.NewBatch()
	b.AppendRecord(30, []*mvccpb.Event{putEv("a", "x", 30, 30, 1)})
	if err := j.Commit(b); err == nil {
		t.Errorf("Commit of revision 30 again succeeded")
	}
	commitT(t, j, Record{Revision: 31, Events: []*mvccpb.Event{putEv("a", "x", 31, 31, 1)}})
}

func TestRecordsRanges(t *testing.T) {
	h := newHistory(2, 20) // revisions 2..20
	j := openT(t, t.TempDir())
	commitT(t, j, h.records...)
	tests := []struct {
		from, to int64
		want     []int64
	}{
		{0, 0, span(2, 20)},
		{-5, 0, span(2, 20)},
		{1, 0, span(2, 20)},
		{2, 5, span(2, 5)},
		{5, 5, []int64{5}},
		{7, 0, span(7, 20)},
		{15, 100, span(15, 20)},
		{20, 20, []int64{20}},
		{21, 0, nil},
		{6, 4, nil},
		{0, 1, nil},
		{3, 1<<63 - 1, span(3, 20)},
	}
	for _, tt := range tests {
		got, err := collect(j.Records(tt.from, tt.to))
		if err != nil {
			t.Errorf("Records(%d, %d): %v", tt.from, tt.to, err)
			continue
		}
		if !slices.Equal(revisions(got), tt.want) {
			t.Errorf("Records(%d, %d) = %v, want %v", tt.from, tt.to, revisions(got), tt.want)
		}
	}
}

func span(from, to int64) []int64 {
	var s []int64
	for r := from; r <= to; r++ {
		s = append(s, r)
	}
	return s
}

// A Records iteration sees the records as of its start, may stop early and
// may commit from its loop body.
func TestRecordsPointInTimeAndReentrant(t *testing.T) {
	h := newHistory(3, 40)
	j := openT(t, t.TempDir())
	commitT(t, j, h.between(2, 20)...)
	var seen []int64
	for rec, err := range j.Records(0, 0) {
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		seen = append(seen, rec.Revision)
		if rec.Revision == 10 {
			commitT(t, j, h.between(21, 40)...)
		}
	}
	if !slices.Equal(seen, span(2, 20)) {
		t.Errorf("iteration saw %v, want 2..20 only", seen)
	}
	for rec, err := range j.Records(0, 0) {
		if err != nil {
			t.Fatalf("Records: %v", err)
		}
		if rec.Revision == 5 {
			break // the iterator must be released
		}
	}
	got, err := collect(j.Records(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	equalRecords(t, got, withoutPrevKv(h.records))
	closeT(t, j) // fails if an iterator leaked
}

func TestRecordsStopWhenClosing(t *testing.T) {
	j := openT(t, t.TempDir())
	commitT(t, j, newHistory(4, 10).records...)
	var seen []int64
	var last error
	for rec, err := range j.Records(0, 0) {
		if err != nil {
			last = err
			break
		}
		seen = append(seen, rec.Revision)
		if rec.Revision == 4 {
			j.life.stopping.Store(true) // what Close does first
		}
	}
	if !errors.Is(last, ErrClosed) || !slices.Equal(seen, []int64{2, 3, 4}) {
		t.Errorf("saw %v then %v; want 2, 3, 4 then ErrClosed", seen, last)
	}
	j.life.stopping.Store(false)
}

func TestCommitRefusesBadBatches(t *testing.T) {
	ok := []*mvccpb.Event{putEv("k", "v", 5, 5, 1)}
	tests := []struct {
		name  string
		build func(b *Batch)
	}{
		{"revision not above last", func(b *Batch) { b.AppendRecord(4, ok) }},
		{"revision zero", func(b *Batch) { b.AppendRecord(0, ok) }},
		{"revisions not increasing", func(b *Batch) { b.AppendRecord(6, ok); b.AppendRecord(6, ok) }},
		{"revisions decreasing", func(b *Batch) { b.AppendRecord(7, ok); b.AppendRecord(6, ok) }},
		{"nil event", func(b *Batch) { b.AppendRecord(5, []*mvccpb.Event{nil}) }},
		{"event without kv", func(b *Batch) {
			b.AppendRecord(5, []*mvccpb.Event{{Type: mvccpb.Event_PUT}})
		}},
		{"empty key", func(b *Batch) { b.AppendRecord(5, []*mvccpb.Event{putEv("", "v", 5, 5, 1)}) }},
		{"unknown event type", func(b *Batch) {
			b.AppendRecord(5, []*mvccpb.Event{{Type: 7, Kv: ok[0].Kv}})
		}},
		{"compact rev above last", func(b *Batch) { b.AppendRecord(5, ok); b.SetCompactRev(6) }},
		{"compact rev below current", func(b *Batch) { b.AppendRecord(5, ok); b.SetCompactRev(2) }},
		{"negative compact rev", func(b *Batch) { b.SetCompactRev(-1) }},
		{"good record after a bad one", func(b *Batch) { b.AppendRecord(3, ok); b.AppendRecord(5, ok) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := openT(t, t.TempDir())
			h := newHistory(5, 4)
			commitT(t, j, h.records...)
			compactT(t, j, 3)
			b := j.NewBatch()
			tt.build(b)
			if err := j.Commit(b); err == nil {
				t.Fatalf("Commit succeeded")
			}
			got, err := collect(j.Records(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			equalRecords(t, got, withoutPrevKv(h.records))
			if err := j.Fold(4, 0); err == nil {
				t.Errorf("compact revision moved: Fold(4) succeeded")
			}
			// The refused batch left the journal usable.
			commitT(t, j, Record{Revision: 5, Events: ok})
		})
	}
}

func TestBatchBookkeeping(t *testing.T) {
	j := openT(t, t.TempDir())
	b := j.NewBatch()
	if b.Len() != 0 {
		t.Errorf("Len() of a new batch = %d", b.Len())
	}
	for rev := int64(2); rev <= 4; rev++ {
		b.AppendRecord(rev, []*mvccpb.Event{putEv("k", "v", 2, rev, rev-1)})
	}
	if b.Len() != 3 {
		t.Errorf("Len() = %d, want 3", b.Len())
	}
	b.Close()
	b.Close()
	if err := j.Commit(b); err == nil {
		t.Errorf("Commit of a closed batch succeeded")
	}
	if err := j.Commit(j.NewBatch()); err != nil {
		t.Errorf("Commit of an empty batch: %v", err)
	}
	other := openT(t, t.TempDir())
	b = other.NewBatch()
	b.AppendRecord(2, []*mvccpb.Event{putEv("k", "v", 2, 2, 1)})
	if err := j.Commit(b); err == nil {
		t.Errorf("Commit of another journal's batch succeeded")
	}
	if recs, _ := collect(j.Records(0, 0)); len(recs) != 0 {
		t.Errorf("refused batches wrote records %v", revisions(recs))
	}
}

func TestClosed(t *testing.T) {
	j := openT(t, t.TempDir())
	commitT(t, j, newHistory(6, 5).records...)
	closeT(t, j)
	if err := j.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
	b := j.NewBatch()
	b.AppendRecord(6, []*mvccpb.Event{putEv("k", "v", 6, 6, 1)})
	if err := j.Commit(b); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit = %v, want ErrClosed", err)
	}
	if _, err := collect(j.Records(0, 0)); !errors.Is(err, ErrClosed) {
		t.Errorf("Records = %v, want ErrClosed", err)
	}
	if _, err := collect(j.Base()); !errors.Is(err, ErrClosed) {
		t.Errorf("Base = %v, want ErrClosed", err)
	}
	if err := j.Fold(0, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Fold = %v, want ErrClosed", err)
	}
	if got := j.Size(); got != 0 {
		t.Errorf("Size = %d, want 0", got)
	}
}

func TestSizeGrows(t *testing.T) {
	j := openT(t, t.TempDir())
	before := j.Size()
	big := make([]byte, 64<<10)
	var recs []Record
	for rev := int64(2); rev <= 33; rev++ {
		recs = append(recs, Record{Revision: rev, Events: []*mvccpb.Event{{
			Kv: &mvccpb.KeyValue{Key: []byte("k"), Value: big, CreateRevision: 2, ModRevision: rev, Version: rev - 1},
		}}})
	}
	commitT(t, j, recs...)
	if after := j.Size(); after < before+int64(len(big))*32 {
		t.Errorf("Size() = %d after writing 2 MiB, %d before", after, before)
	}
}

func TestOpenOfAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if j, err := Open(path, Options{}); err == nil {
		j.Close()
		t.Fatalf("Open of a regular file succeeded")
	}
}

// TestRecordsStopAtTheDurableRevision: Pebble shows a write to readers
// before its WAL sync completes; Records must not yield a record past the
// last revision a Commit returned for. The test plays the not-yet-synced
// record by writing one to Pebble behind the journal's back.
func TestRecordsStopAtTheDurableRevision(t *testing.T) {
	j := openT(t, t.TempDir())
	commitT(t, j, crashRecord(2), crashRecord(3))
	b := j.NewBatch()
	b.AppendRecord(4, crashRecord(4).Events)
	if err := b.pb.Commit(pebble.NoSync); err != nil { // not through Commit
		t.Fatal(err)
	}
	for _, to := range []int64{0, 4, 10} {
		got, err := collect(j.Records(2, to))
		if err != nil {
			t.Fatal(err)
		}
		equalRecords(t, got, []Record{crashRecord(2), crashRecord(3)})
	}
	if got, err := collect(j.Records(4, 0)); err != nil || len(got) != 0 {
		t.Fatalf("Records(4, 0) = %v, %v; want nothing", got, err)
	}
}
