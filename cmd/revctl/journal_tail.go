package main

import (
	"bufio"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"revd/client/natsclient"
	"revd/cmd/revctl/internal/journaltool"
	"revd/journal"
)

// journalTail streams every event of a running server from revision --from
// (default: the next one) in export's event format, until interrupted. It
// is a watch on every key: revisions come whole and in order, and the
// client resumes by itself across server restarts.
func (r *runner) journalTail(args []string, o journalOptions) error {
	if err := needArgs("tail", args, 0, ""); err != nil {
		return err
	}
	format, err := journaltool.ParseFormat(o.format)
	if err != nil {
		return journalUsageErr("%v", err)
	}
	kv, err := r.client()
	if err != nil {
		return &exitErr{code: exitJournalUsage, err: err}
	}
	wc, ok := kv.(watchClient)
	if !ok {
		return journalUsageErr("this client cannot watch")
	}
	ctx, stop := r.interruptible()
	defer stop()
	w, err := wc.Watch(ctx, &pb.WatchCreateRequest{Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: o.from}, natsclient.WatchOptions{})
	if err != nil {
		return err
	}
	out := bufio.NewWriter(r.stdout)
	defer out.Flush()
	rw := journaltool.NewRecordWriter(out, format)
	var pending []*mvccpb.Event // a revision split across fragments
	for resp := range w.C {
		if resp.Canceled {
			if resp.CompactRevision != 0 {
				return exitErrorf(exitJournalFailed, "revision %d is compacted (compact revision %d): tail from a later one", o.from, resp.CompactRevision)
			}
			return exitErrorf(exitJournalFailed, "the server canceled the tail: %s", resp.CancelReason)
		}
		pending = append(pending, resp.Events...)
		if resp.Fragment {
			continue
		}
		for len(pending) > 0 {
			rev := pending[0].Kv.ModRevision
			n := 1
			for n < len(pending) && pending[n].Kv.ModRevision == rev {
				n++
			}
			if err := rw.Write(journal.Record{Revision: rev, Events: pending[:n]}); err != nil {
				return err
			}
			pending = pending[n:]
		}
		pending = nil
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}
