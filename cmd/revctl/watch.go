package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/v3"

	"revd/client/natsclient"
)

// watchClient is what revctl watch needs: *natsclient.Client has it.
type watchClient interface {
	Watch(context.Context, *pb.WatchCreateRequest, natsclient.WatchOptions) (*natsclient.Watcher, error)
}

// watchCommand is etcdctl's watch (non-interactive): it prints every event
// until interrupted, resuming by itself if revd restarts.
func watchCommand(r *runner, fs *flagSet) func([]string) error {
	var prefix, prevKV, progress bool
	var rev int64
	fs.fs.BoolVar(&prefix, "prefix", false, "Watch on a prefix if prefix is set")
	fs.fs.Int64Var(&rev, "rev", 0, "Revision to start watching")
	fs.fs.BoolVar(&prevKV, "prev-kv", false, "get the previous key-value pair before the event happens")
	fs.fs.BoolVar(&progress, "progress-notify", false, "get periodic watch progress notification from server")
	return func(args []string) error {
		switch {
		case len(args) < 1 || len(args) > 2:
			return exitErrorf(exitBadArgs, "bad number of arguments")
		case prefix && len(args) == 2:
			return exitErrorf(exitBadArgs, "`range_end` and `--prefix` are mutually exclusive")
		}
		req := &pb.WatchCreateRequest{Key: []byte(args[0]), StartRevision: rev, PrevKv: prevKV, ProgressNotify: progress}
		switch {
		case prefix:
			req.RangeEnd = []byte(clientv3.GetPrefixRangeEnd(args[0]))
		case len(args) == 2:
			req.RangeEnd = []byte(args[1])
		}
		kv, err := r.client()
		if err != nil {
			return err
		}
		wc, ok := kv.(watchClient)
		if !ok {
			return errors.New("this client cannot watch")
		}
		ctx, stop := r.interruptible()
		defer stop()
		w, err := wc.Watch(ctx, req, natsclient.WatchOptions{})
		if err != nil {
			return err
		}
		for resp := range w.C {
			// etcd's client passes on a created response only when it
			// cancels the watch.
			if resp.Created && !resp.Canceled {
				continue
			}
			wr := clientResponse(resp)
			if wr.Canceled {
				fmt.Fprintf(r.stderr, "watch was canceled (%v)\n", wr.Err())
			}
			if wr.IsProgressNotify() {
				fmt.Fprintf(r.stdout, "progress notify: %d\n", wr.Header.GetRevision())
			}
			if err := r.printWatch(wr); err != nil {
				return err
			}
			if wr.Canceled {
				return exitErrorf(exitInterrupted, "watch is canceled by the server")
			}
		}
		return nil
	}
}

// clientResponse is resp as etcd's Go client hands it to etcdctl.
func clientResponse(resp *pb.WatchResponse) *clientv3.WatchResponse {
	return &clientv3.WatchResponse{
		Header: resp.Header, Events: resp.Events, CompactRevision: resp.CompactRevision,
		Canceled: resp.Canceled, Created: resp.Created, CancelReason: resp.CancelReason,
	}
}

// interruptible is the context of a command that runs until SIGINT or
// SIGTERM (or the test's interrupt).
func (r *runner) interruptible() (context.Context, context.CancelFunc) {
	if r.interrupt != nil {
		return context.WithCancel(r.interrupt)
	}
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// printWatch prints a watch response as etcdctl watch does in each output
// format: simple, the event type, the previous pair if asked for, then the
// pair; json, the client's response as Go marshals it; fields, the header
// and the events; protobuf, the response message.
func (r *runner) printWatch(resp *clientv3.WatchResponse) error {
	switch p := r.display.(type) {
	case *jsonPrinter:
		return p.print(resp)
	case *fieldsPrinter:
		p.hdr(resp.Header)
		for _, ev := range resp.Events {
			fmt.Fprintln(p.w, `"Type" :`, ev.GetType())
			if ev.GetPrevKv() != nil {
				p.kv("Prev", ev.GetPrevKv())
			}
			p.kv("", ev.GetKv())
		}
		return nil
	case *pbPrinter:
		return p.print(&pb.WatchResponse{Header: resp.Header, Events: resp.Events, CompactRevision: resp.CompactRevision,
			Canceled: resp.Canceled, Created: resp.Created})
	case *simplePrinter:
		for _, ev := range resp.Events {
			fmt.Fprintln(r.stdout, ev.Type)
			if ev.PrevKv != nil {
				p.kv(ev.PrevKv)
			}
			p.kv(ev.Kv)
		}
		return nil
	}
	return exitErrorf(exitBadFeature, "unsupported output format")
}
