package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// leaseClient is what the lease commands need; *natsclient.Client has it.
type leaseClient interface {
	LeaseGrant(context.Context, *pb.LeaseGrantRequest) (*pb.LeaseGrantResponse, error)
	LeaseRevoke(context.Context, *pb.LeaseRevokeRequest) (*pb.LeaseRevokeResponse, error)
	LeaseTimeToLive(context.Context, *pb.LeaseTimeToLiveRequest) (*pb.LeaseTimeToLiveResponse, error)
	LeaseLeases(context.Context, *pb.LeaseLeasesRequest) (*pb.LeaseLeasesResponse, error)
	LeaseKeepAliveOnce(context.Context, *pb.LeaseKeepAliveRequest) (*pb.LeaseKeepAliveResponse, error)
	KeepAlive(ctx context.Context, id int64) (<-chan *pb.LeaseKeepAliveResponse, error)
}

// leaseSubcommands are etcdctl 3.7's lease subcommands, in its order.
var leaseSubcommands = []struct{ name, use, short string }{
	{"grant", "grant <ttl> [--id <leaseID>]", "Creates leases (--id: the lease ID in hex; revd's addition)"},
	{"revoke", "revoke <leaseID>", "Revokes leases"},
	{"timetolive", "timetolive <leaseID> [--keys]", "Get lease information"},
	{"list", "list", "List all active leases"},
	{"keep-alive", "keep-alive [--once] <leaseID>", "Keeps leases alive (renew)"},
}

// leaseOptions are the flags of every lease subcommand; each subcommand
// refuses the others' flags, as etcdctl's separate flag sets do.
type leaseOptions struct {
	id         string
	keys, once bool
}

var leaseFlagOwner = map[string]string{"id": "grant", "keys": "timetolive", "once": "keep-alive"}

// leaseCommand runs "lease <subcommand>" as etcdctl 3.7.3 does: the same
// arguments, messages, exit codes and output (IDs in hex).
func leaseCommand(r *runner, fs *flagSet) func([]string) error {
	var o leaseOptions
	fs.fs.StringVar(&o.id, "id", "", "grant: the lease ID to grant, in hex (default: the server chooses)")
	fs.fs.BoolVar(&o.keys, "keys", false, "timetolive: get keys attached to this lease")
	fs.fs.BoolVar(&o.once, "once", false, "keep-alive: resets the keep-alive time to its original value and exits immediately")
	return func(args []string) error {
		if len(args) == 0 {
			r.leaseUsage()
			return nil
		}
		sub, err := findLeaseSubcommand(args[0])
		if err != nil {
			return err
		}
		for flag, owner := range leaseFlagOwner {
			if owner != sub && fs.changed(flag) {
				return fmt.Errorf("unknown flag: --%s", flag)
			}
		}
		args = args[1:]
		switch sub {
		case "grant":
			return r.leaseGrant(args, o)
		case "revoke":
			return r.leaseRevoke(args)
		case "timetolive":
			return r.leaseTimeToLive(args, o.keys)
		case "list":
			return r.leaseList()
		default:
			return r.leaseKeepAlive(args, o.once)
		}
	}
}

func findLeaseSubcommand(name string) (string, error) {
	names := make([]string, len(leaseSubcommands))
	for i, s := range leaseSubcommands {
		names[i] = s.name
	}
	if sub := subcommand(name, names...); sub != "" {
		return sub, nil
	}
	return "", fmt.Errorf("unknown command %q for \"revctl lease\"", name)
}

func (r *runner) leaseUsage() {
	w := r.stdout
	fmt.Fprintln(w, "Lease related commands\n\nUsage:\n  revctl lease <subcommand> [options]\n\nSubcommands:")
	for _, s := range leaseSubcommands {
		fmt.Fprintf(w, "  %-32s %s\n", s.use, s.short)
	}
}

func (r *runner) leaseClient() (leaseClient, leasePrinter, error) {
	kv, err := r.client()
	if err != nil {
		return nil, nil, err
	}
	lc, ok := kv.(leaseClient)
	if !ok {
		return nil, nil, errors.New("this client cannot send lease requests")
	}
	return lc, r.display.(leasePrinter), nil
}

// leaseFromArg parses a lease ID in hex, as etcdctl's leaseFromArgs does.
func leaseFromArg(arg string) (int64, error) {
	id, err := strconv.ParseInt(arg, 16, 64)
	if err != nil {
		return 0, exitErrorf(exitBadArgs, "bad lease ID arg (%w), expecting ID in Hex", err)
	}
	return id, nil
}

func (r *runner) leaseGrant(args []string, o leaseOptions) error {
	if len(args) != 1 {
		return exitErrorf(exitBadArgs, "lease grant command needs TTL argument")
	}
	ttl, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return exitErrorf(exitBadArgs, "bad TTL (%w)", err)
	}
	req := &pb.LeaseGrantRequest{TTL: ttl}
	if o.id != "" {
		if req.ID, err = leaseFromArg(o.id); err != nil {
			return err
		}
	}
	lc, p, err := r.leaseClient()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	resp, err := lc.LeaseGrant(ctx, req)
	cancel()
	if err != nil {
		return fmt.Errorf("failed to grant lease (%w)", err)
	}
	return p.Grant(resp)
}

func (r *runner) leaseRevoke(args []string) error {
	if len(args) != 1 {
		return exitErrorf(exitBadArgs, "lease revoke command needs 1 argument")
	}
	id, err := leaseFromArg(args[0])
	if err != nil {
		return err
	}
	lc, p, err := r.leaseClient()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	resp, err := lc.LeaseRevoke(ctx, &pb.LeaseRevokeRequest{ID: id})
	cancel()
	if err != nil {
		return fmt.Errorf("failed to revoke lease (%w)", err)
	}
	return p.Revoke(id, resp)
}

// leaseTimeToLive: etcdctl sends it without a timeout and exits with its
// "bad connection" code on any error.
func (r *runner) leaseTimeToLive(args []string, keys bool) error {
	if len(args) != 1 {
		return exitErrorf(exitBadArgs, "lease timetolive command needs lease ID as argument")
	}
	id, err := leaseFromArg(args[0])
	if err != nil {
		return err
	}
	lc, p, err := r.leaseClient()
	if err != nil {
		return err
	}
	resp, err := lc.LeaseTimeToLive(context.Background(), &pb.LeaseTimeToLiveRequest{ID: id, Keys: keys})
	if err != nil {
		return &exitErr{code: exitBadConnection, err: err}
	}
	return p.TimeToLive(resp, keys)
}

func (r *runner) leaseList() error {
	lc, p, err := r.leaseClient()
	if err != nil {
		return err
	}
	resp, err := lc.LeaseLeases(context.Background(), &pb.LeaseLeasesRequest{})
	if err != nil {
		return &exitErr{code: exitBadConnection, err: err}
	}
	return p.Leases(resp)
}

// leaseKeepAlive renews until the lease is gone (printing each renewal and,
// in the simple format, "expired or revoked" at the end), or once with
// --once, where a lease that does not exist is an error.
func (r *runner) leaseKeepAlive(args []string, once bool) error {
	if len(args) != 1 {
		return exitErrorf(exitBadArgs, "lease keep-alive command needs lease ID as argument")
	}
	id, err := leaseFromArg(args[0])
	if err != nil {
		return err
	}
	lc, p, err := r.leaseClient()
	if err != nil {
		return err
	}
	if once {
		resp, err := lc.LeaseKeepAliveOnce(context.Background(), &pb.LeaseKeepAliveRequest{ID: id})
		if err == nil && resp.TTL <= 0 {
			err = rpctypes.ErrLeaseNotFound
		}
		if err != nil {
			return &exitErr{code: exitBadConnection, err: err}
		}
		return p.KeepAlive(resp)
	}
	respc, err := lc.KeepAlive(context.Background(), id)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// clientv3 hands etcdctl a channel that closes at once.
	case err != nil:
		return &exitErr{code: exitBadConnection, err: err}
	default:
		for resp := range respc {
			if err := p.KeepAlive(resp); err != nil {
				return err
			}
		}
	}
	if _, ok := p.(*simplePrinter); ok {
		fmt.Fprintf(r.stdout, "lease %016x expired or revoked.\n", id)
	}
	return nil
}
