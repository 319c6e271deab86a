package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// The request builders below follow etcdctl 3.7's get/put/del commands and
// clientv3's OpGet/OpPut/OpDelete, so that revctl sends the request etcdctl
// would send for the same command line, and rejects the same command lines
// with the same messages and exit codes.

// getOptions are the flags of get (and of a get inside txn).
type getOptions struct {
	consistency, order, sortBy           string
	limit, rev                           int64
	prefix, fromKey, keysOnly, countOnly bool
	printValueOnly                       bool
	minCreateRev, maxCreateRev           int64
	minModRev, maxModRev                 int64
}

func (o *getOptions) define(fs *flagSet) {
	f := fs.fs
	f.StringVar(&o.consistency, "consistency", "l", "Linearizable(l) or Serializable(s)")
	f.StringVar(&o.order, "order", "", "Order of results; ASCEND or DESCEND (ASCEND by default)")
	f.StringVar(&o.sortBy, "sort-by", "", "Sort target; CREATE, KEY, MODIFY, VALUE, or VERSION")
	f.Int64Var(&o.limit, "limit", 0, "Maximum number of results")
	f.BoolVar(&o.prefix, "prefix", false, "Get keys with matching prefix")
	f.BoolVar(&o.fromKey, "from-key", false, "Get keys that are greater than or equal to the given key using byte compare")
	f.Int64Var(&o.rev, "rev", 0, "Specify the kv revision")
	f.BoolVar(&o.keysOnly, "keys-only", false, "Get only the keys")
	f.BoolVar(&o.countOnly, "count-only", false, "Get only the count")
	f.BoolVar(&o.printValueOnly, "print-value-only", false, `Only write values when using the "simple" output format`)
	f.Int64Var(&o.minCreateRev, "min-create-rev", 0, "Minimum create revision")
	f.Int64Var(&o.maxCreateRev, "max-create-rev", 0, "Maximum create revision")
	f.Int64Var(&o.minModRev, "min-mod-rev", 0, "Minimum modification revision")
	f.Int64Var(&o.maxModRev, "max-mod-rev", 0, "Maximum modification revision")
}

// request builds the RangeRequest for get's arguments (etcdctl's getGetOp).
func (o *getOptions) request(args []string) (*pb.RangeRequest, error) {
	if len(args) == 0 {
		return nil, exitErrorf(exitBadArgs, "get command needs one argument as key and an optional argument as range_end")
	}
	if o.prefix && o.fromKey {
		return nil, exitErrorf(exitBadArgs, "`--prefix` and `--from-key` cannot be set at the same time, choose one")
	}
	if o.keysOnly && o.countOnly {
		return nil, exitErrorf(exitBadArgs, "`--keys-only` and `--count-only` cannot be set at the same time, choose one")
	}
	req := &pb.RangeRequest{Key: []byte(args[0])}
	switch o.consistency {
	case "s":
		req.Serializable = true
	case "l":
	default:
		return nil, exitErrorf(exitBadFeature, "unknown consistency flag %q", o.consistency)
	}
	if len(args) > 1 {
		if o.prefix || o.fromKey {
			return nil, exitErrorf(exitBadArgs, "too many arguments, only accept one argument when `--prefix` or `--from-key` is set")
		}
		req.RangeEnd = []byte(args[1])
	}
	req.Limit = o.limit
	if o.rev > 0 {
		req.Revision = o.rev
	}

	order := pb.RangeRequest_NONE
	switch strings.ToUpper(o.order) {
	case "ASCEND":
		order = pb.RangeRequest_ASCEND
	case "DESCEND":
		order = pb.RangeRequest_DESCEND
	case "":
	default:
		return nil, exitErrorf(exitBadFeature, "bad sort order %v", o.order)
	}
	target := pb.RangeRequest_KEY
	switch strings.ToUpper(o.sortBy) {
	case "CREATE":
		target = pb.RangeRequest_CREATE
	case "KEY":
		target = pb.RangeRequest_KEY
	case "MODIFY":
		target = pb.RangeRequest_MOD
	case "VALUE":
		target = pb.RangeRequest_VALUE
	case "VERSION":
		target = pb.RangeRequest_VERSION
	case "":
	default:
		return nil, exitErrorf(exitBadFeature, "bad sort target %v", o.sortBy)
	}
	// clientv3 drops ASCEND when sorting by key: that is the server's
	// natural order, and asking for it would make the server sort.
	if target == pb.RangeRequest_KEY && order == pb.RangeRequest_ASCEND {
		order = pb.RangeRequest_NONE
	}
	req.SortOrder, req.SortTarget = order, target

	if o.prefix {
		prefixRange(&req.Key, &req.RangeEnd)
	}
	if o.fromKey {
		fromKeyRange(&req.Key, &req.RangeEnd)
	}
	req.KeysOnly = o.keysOnly
	req.CountOnly = o.countOnly
	if o.minCreateRev > 0 {
		req.MinCreateRevision = o.minCreateRev
	}
	if o.maxCreateRev > 0 {
		if o.minCreateRev > o.maxCreateRev {
			return nil, exitErrorf(exitBadFeature, "getMinCreateRev(=%v) > getMaxCreateRev(=%v)", o.minCreateRev, o.maxCreateRev)
		}
		req.MaxCreateRevision = o.maxCreateRev
	}
	if o.minModRev > 0 {
		req.MinModRevision = o.minModRev
	}
	if o.maxModRev > 0 {
		if o.minModRev > o.maxModRev {
			return nil, exitErrorf(exitBadFeature, "getMinModRev(=%v) > getMaxModRev(=%v)", o.minModRev, o.maxModRev)
		}
		req.MaxModRevision = o.maxModRev
	}
	return req, nil
}

// prefixRange makes key..end the keys with prefix key; an empty key means
// every key (etcdctl's --prefix with "", which is --from-key "\x00").
func prefixRange(key, end *[]byte) {
	if len(*key) == 0 {
		*key, *end = []byte{0}, []byte{0}
		return
	}
	*end = prefixEnd(*key)
}

// fromKeyRange makes key..end every key from key on; an empty key starts
// at "\x00".
func fromKeyRange(key, end *[]byte) {
	if len(*key) == 0 {
		*key = []byte{0}
	}
	*end = []byte{0}
}

// prefixEnd is the first key after every key with the given prefix: the
// prefix with its last byte below 0xff incremented; "\x00" (no end) when
// the prefix is all 0xff.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0}
}

func getCommand(r *runner, fs *flagSet) func([]string) error {
	var o getOptions
	o.define(fs)
	return func(args []string) error {
		req, err := o.request(args)
		if err != nil {
			return err
		}
		kv, err := r.client()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		resp, err := kv.Range(ctx, req)
		cancel()
		if err != nil {
			return err
		}
		if o.countOnly {
			if _, ok := r.display.(*fieldsPrinter); !ok {
				return exitErrorf(exitBadArgs, "--count-only is only for `--write-out=fields`")
			}
		}
		if o.printValueOnly {
			sp, ok := r.display.(*simplePrinter)
			if !ok {
				return exitErrorf(exitBadArgs, "print-value-only is only for `--write-out=simple`")
			}
			sp.valueOnly = true
		}
		return r.display.Get(resp)
	}
}

// putOptions are the flags of put (and of a put inside txn).
type putOptions struct {
	lease                            string
	prevKV, ignoreValue, ignoreLease bool
}

func (o *putOptions) define(fs *flagSet) {
	f := fs.fs
	f.StringVar(&o.lease, "lease", "0", "lease ID (in hexadecimal) to attach to the key")
	f.BoolVar(&o.prevKV, "prev-kv", false, "return the previous key-value pair before modification")
	f.BoolVar(&o.ignoreValue, "ignore-value", false, "updates the key using its current value")
	f.BoolVar(&o.ignoreLease, "ignore-lease", false, "updates the key using its current lease")
}

var errPutArgs = errors.New("put command needs 1 argument and input from stdin or 2 arguments")

// request builds the PutRequest for put's arguments (etcdctl's getPutOp);
// without a value argument the value is all of stdin.
func (o *putOptions) request(args []string, stdin io.Reader) (*pb.PutRequest, error) {
	if len(args) == 0 {
		return nil, &exitErr{exitBadArgs, errPutArgs}
	}
	if o.ignoreValue && len(args) > 1 {
		return nil, exitErrorf(exitBadArgs, "put command needs only 1 argument when 'ignore-value' is set")
	}
	req := &pb.PutRequest{Key: []byte(args[0])}
	if !o.ignoreValue {
		switch {
		case len(args) > 1:
			req.Value = []byte(args[1])
		case stdin != nil:
			b, err := io.ReadAll(stdin)
			if err != nil || len(b) == 0 {
				return nil, &exitErr{exitBadArgs, errPutArgs}
			}
			req.Value = b
		default:
			return nil, &exitErr{exitBadArgs, errPutArgs}
		}
	}
	id, err := strconv.ParseInt(o.lease, 16, 64)
	if err != nil {
		return nil, exitErrorf(exitBadArgs, "bad lease ID (%w), expecting ID in Hex", err)
	}
	req.Lease = id
	req.PrevKv = o.prevKV
	req.IgnoreValue = o.ignoreValue
	req.IgnoreLease = o.ignoreLease
	return req, nil
}

func putCommand(r *runner, fs *flagSet) func([]string) error {
	var o putOptions
	o.define(fs)
	return func(args []string) error {
		req, err := o.request(args, r.stdin)
		if err != nil {
			return err
		}
		kv, err := r.client()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		resp, err := kv.Put(ctx, req)
		cancel()
		if err != nil {
			return err
		}
		return r.display.Put(resp)
	}
}

// delOptions are the flags of del (and of a del inside txn).
type delOptions struct {
	prefix, prevKV, fromKey, rangeOK bool
}

func (o *delOptions) define(fs *flagSet) {
	f := fs.fs
	f.BoolVar(&o.prefix, "prefix", false, "delete keys with matching prefix")
	f.BoolVar(&o.prevKV, "prev-kv", false, "return deleted key-value pairs")
	f.BoolVar(&o.fromKey, "from-key", false, "delete keys that are greater than or equal to the given key using byte compare")
	f.BoolVar(&o.rangeOK, "range", false, "delete range of keys")
}

// request builds the DeleteRangeRequest for del's arguments (etcdctl's
// getDelOp). Deleting [key, range_end) without --range first warns on
// stderr and waits two seconds, as etcdctl does, to give a chance to
// interrupt.
func (o *delOptions) request(args []string, stderr io.Writer, sleep func(time.Duration)) (*pb.DeleteRangeRequest, error) {
	if len(args) == 0 || len(args) > 2 {
		return nil, exitErrorf(exitBadArgs, "del command needs one argument as key and an optional argument as range_end")
	}
	if o.prefix && o.fromKey {
		return nil, exitErrorf(exitBadArgs, "`--prefix` and `--from-key` cannot be set at the same time, choose one")
	}
	req := &pb.DeleteRangeRequest{Key: []byte(args[0])}
	if len(args) > 1 {
		if o.prefix || o.fromKey {
			return nil, exitErrorf(exitBadArgs, "too many arguments, only accept one argument when `--prefix` or `--from-key` is set")
		}
		req.RangeEnd = []byte(args[1])
		if !o.rangeOK {
			fmt.Fprintf(stderr, "Warning: Keys between %q and %q will be deleted. Please interrupt the command within next 2 seconds to cancel. "+
				"You can provide `--range` flag to avoid the delay.\n", args[0], args[1])
			sleep(2 * time.Second)
		}
	}
	if o.prefix {
		prefixRange(&req.Key, &req.RangeEnd)
	}
	req.PrevKv = o.prevKV
	if o.fromKey {
		fromKeyRange(&req.Key, &req.RangeEnd)
	}
	return req, nil
}

func delCommand(r *runner, fs *flagSet) func([]string) error {
	var o delOptions
	o.define(fs)
	return func(args []string) error {
		req, err := o.request(args, r.stderr, r.sleep)
		if err != nil {
			return err
		}
		kv, err := r.client()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		resp, err := kv.DeleteRange(ctx, req)
		cancel()
		if err != nil {
			return err
		}
		return r.display.Del(resp)
	}
}

func compactionCommand(r *runner, fs *flagSet) func([]string) error {
	var physical bool
	fs.fs.BoolVar(&physical, "physical", false, "'true' to wait for compaction to physically remove all old revisions")
	return func(args []string) error {
		if len(args) != 1 {
			return exitErrorf(exitBadArgs, "compaction command needs 1 argument")
		}
		rev, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil {
			return err
		}
		kv, err := r.client()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		_, err = kv.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: physical})
		cancel()
		if err != nil {
			return err
		}
		fmt.Fprintln(r.stdout, "compacted revision", rev)
		return nil
	}
}

func endpointCommand(r *runner, fs *flagSet) func([]string) error {
	var rev int64
	fs.fs.Int64Var(&rev, "rev", 0, "hashkv: maximum revision to hash (default: latest revision)")
	return func(args []string) error {
		if len(args) == 0 {
			r.usage([]string{"endpoint"})
			return nil
		}
		sub := subcommand(args[0], "health", "status", "hashkv")
		if sub != "hashkv" && fs.changed("rev") {
			return errors.New("unknown flag: --rev")
		}
		switch sub {
		case "status":
			return r.endpointStatus()
		case "health":
			return r.endpointHealth()
		case "hashkv":
			return r.endpointHashKV(rev)
		}
		return fmt.Errorf("unknown command %q for \"revctl endpoint\"", args[0])
	}
}

// endpointStatus reports Maintenance.Status of the NATS endpoint, in
// etcdctl's format; on failure it says so on stderr and exits 1 after
// printing the (empty) list, as etcdctl does.
func (r *runner) endpointStatus() error {
	kv, err := r.client()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	resp, err := kv.Status(ctx, &pb.StatusRequest{})
	cancel()
	var list []epStatus
	if err != nil {
		fmt.Fprintf(r.stderr, "Failed to get the status of endpoint %s (%v)\n", r.endpoint(), err)
	} else {
		list = append(list, epStatus{Ep: r.endpoint(), Resp: resp})
	}
	if perr := r.display.EndpointStatus(list); perr != nil {
		return perr
	}
	if err != nil {
		return &exitErr{code: exitError, err: errSilent}
	}
	return nil
}

// errSilent marks a failure that was already reported.
var errSilent = errors.New("")
