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

	"revd/gateway/natsclient"
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
		if len(args) < 1 || len(args) > 2 || (prefix && len(args) == 2) {
			return exitErrorf(exitBadArgs, "watch needs a key, and optionally a range_end (not with --prefix)")
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
			if err := r.printWatch(resp); err != nil {
				return err
			}
			if resp.Canceled {
				if resp.CompactRevision != 0 {
					return fmt.Errorf("watch canceled: required revision has been compacted (compact revision %d)", resp.CompactRevision)
				}
				return fmt.Errorf("watch canceled by the server: %s", resp.CancelReason)
			}
		}
		return nil
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

// printWatch prints a response's events as etcdctl watch does: the event
// type, the previous pair if asked for, then the pair.
func (r *runner) printWatch(resp *pb.WatchResponse) error {
	if jp, ok := r.display.(*jsonPrinter); ok {
		return jp.print(resp)
	}
	sp, ok := r.display.(*simplePrinter)
	if !ok {
		return exitErrorf(exitBadFeature, "watch supports the simple and json output formats")
	}
	for _, ev := range resp.Events {
		fmt.Fprintln(r.stdout, ev.Type)
		if ev.PrevKv != nil {
			sp.kv(ev.PrevKv)
		}
		sp.kv(ev.Kv)
	}
	return nil
}
