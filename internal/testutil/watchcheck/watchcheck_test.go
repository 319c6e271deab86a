package watchcheck

import (
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

func put(key string, rev int64) *mvccpb.Event {
	return &mvccpb.Event{Type: mvccpb.Event_PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), Value: []byte("v"), ModRevision: rev}}
}

func hdr(rev int64) *pb.ResponseHeader { return &pb.ResponseHeader{Revision: rev} }

func created(id, rev int64) *pb.WatchResponse {
	return &pb.WatchResponse{Header: hdr(rev), WatchId: id, Created: true}
}

func progress(rev int64) *pb.WatchResponse { return &pb.WatchResponse{Header: hdr(rev), WatchId: -1} }

func events(id, hrev int64, evs ...*mvccpb.Event) *pb.WatchResponse {
	return &pb.WatchResponse{Header: hdr(hrev), WatchId: id, Events: evs}
}

// history: k at 2, 3, 4; x at 5.
var history = []Revision{
	{2, []*mvccpb.Event{put("k", 2)}},
	{3, []*mvccpb.Event{put("k", 3)}},
	{4, []*mvccpb.Event{put("k", 4)}},
	{5, []*mvccpb.Event{put("x", 5)}},
}

func TestCheck(t *testing.T) {
	a := &pb.WatchCreateRequest{Key: []byte("x")}                   // from the next revision
	b := &pb.WatchCreateRequest{Key: []byte("k"), StartRevision: 1} // catches up 2..4
	tests := []struct {
		name  string
		resps []*pb.WatchResponse
		hist  []Revision
		want  string // a fragment of the first violation; "" for none
	}{
		{"progress before B's created: B is not told", []*pb.WatchResponse{
			created(0, 4), progress(4), created(1, 4), events(1, 4, put("k", 2), put("k", 3), put("k", 4)),
		}, history, ""},
		{"issue 29: progress after B's created, before its events", []*pb.WatchResponse{
			created(0, 4), created(1, 4), progress(4), events(1, 4, put("k", 2), put("k", 3), put("k", 4)),
		}, nil, "event at revision 2 (key \"k\") after a progress response at revision 4"},
		{"the same, seen with the history when the progress arrives", []*pb.WatchResponse{
			created(0, 4), created(1, 4), progress(4), events(1, 4, put("k", 2), put("k", 3), put("k", 4)),
		}, history, "told progress at revision 4 but has not received its event at revision 2"},
		{"progress after B's events", []*pb.WatchResponse{
			created(0, 4), created(1, 4), events(1, 4, put("k", 2), put("k", 3), put("k", 4)), progress(4), events(0, 5, put("x", 5)),
		}, history, ""},
		{"a gap", []*pb.WatchResponse{
			created(0, 4), created(1, 4), events(1, 4, put("k", 2), put("k", 4)),
		}, history, "event #1 is"},
		{"a duplicate", []*pb.WatchResponse{
			created(0, 4), created(1, 4), events(1, 2, put("k", 2)), events(1, 2, put("k", 2)),
		}, nil, "split over two responses, or repeated"},
		{"out of order", []*pb.WatchResponse{
			created(0, 4), created(1, 4), events(1, 3, put("k", 3)), events(1, 3, put("k", 2)),
		}, nil, "event at revision 2 after one at 3"},
		{"a progress revision behind an event already sent", []*pb.WatchResponse{
			created(0, 4), created(1, 4), events(1, 4, put("k", 2), put("k", 3), put("k", 4)), progress(3),
		}, nil, "progress at revision 3 after an event at revision 4"},
		{"a watcher's own progress notification covers it alone", []*pb.WatchResponse{
			created(0, 4), created(1, 4), {Header: hdr(4), WatchId: 0}, events(1, 4, put("k", 2), put("k", 3), put("k", 4)),
		}, history, ""},
		{"events after a cancel", []*pb.WatchResponse{
			created(0, 4), created(1, 4), {Header: hdr(4), WatchId: 1, Canceled: true}, events(1, 4, put("k", 2)),
		}, nil, "events for watch 1, which is not open"},
		{"fragments are one response", []*pb.WatchResponse{
			created(0, 4), created(1, 4),
			{Header: hdr(4), WatchId: 1, Events: []*mvccpb.Event{put("k", 2)}, Fragment: true},
			events(1, 4, put("k", 3), put("k", 4)), progress(5), events(0, 5, put("x", 5)),
		}, history, "has not received its event at revision 5 (key \"x\")"},
	}
	for _, tc := range tests {
		rep := Check(Input{Creates: []*pb.WatchCreateRequest{a, b}, Responses: tc.resps, History: tc.hist})
		switch {
		case tc.want == "" && len(rep.Violations) > 0:
			t.Errorf("%s: violations %q", tc.name, rep.Violations)
		case tc.want != "" && len(rep.Violations) == 0:
			t.Errorf("%s: no violation, want %q", tc.name, tc.want)
		case tc.want != "" && !strings.Contains(rep.Violations[0], tc.want):
			t.Errorf("%s: first violation %q, want %q", tc.name, rep.Violations[0], tc.want)
		}
	}
}
