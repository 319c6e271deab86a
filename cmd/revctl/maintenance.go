package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"revd/client/natsclient"
)

// endpoint health, endpoint hashkv and defrag, as etcdctl 3.7.3 runs
// them, against the one revd behind the NATS URL (the endpoint they
// print).

// endpoint is the NATS URL the endpoint commands print, its password or
// token masked.
func (r *runner) endpoint() string { return natsclient.RedactURLs(r.g.natsURL) }

// epHealth is one endpoint's health; the JSON names are etcdctl's.
type epHealth struct {
	Ep     string `json:"endpoint"`
	Health bool   `json:"health"`
	Took   string `json:"took"`
	Error  string `json:"error,omitempty"`
}

// epHashKV is one endpoint's HashKV answer; the JSON names are etcdctl's.
type epHashKV struct {
	Ep   string             `json:"Endpoint"`
	Resp *pb.HashKVResponse `json:"HashKV"`
}

// maintenancePrinter prints them as etcdctl's printers do; every printer of
// newPrinter has it.
type maintenancePrinter interface {
	EndpointHealth([]epHealth) error
	EndpointHashKV([]epHashKV) error
}

var (
	_ maintenancePrinter = (*simplePrinter)(nil)
	_ maintenancePrinter = (*jsonPrinter)(nil)
	_ maintenancePrinter = (*fieldsPrinter)(nil)
	_ maintenancePrinter = (*pbPrinter)(nil)
	_ maintenancePrinter = (*tablePrinter)(nil)
)

// endpointHealth reads the key "health" (permission denied counts as
// healthy: the request went through) and requires an empty alarm list,
// as etcdctl does; an unhealthy endpoint exits 1 with "unhealthy cluster".
func (r *runner) endpointHealth() error {
	cc, _, err := r.clusterClient()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	defer cancel()
	start := time.Now()
	_, err = r.kv.Range(ctx, &pb.RangeRequest{Key: []byte("health")})
	h := epHealth{Ep: r.endpoint(), Took: time.Since(start).String()}
	if err == nil || errors.Is(err, rpctypes.ErrPermissionDenied) {
		h.Health = true
	} else {
		h.Error = err.Error()
	}
	if h.Health {
		resp, err := cc.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		switch {
		case err != nil:
			h.Health, h.Error = false, "Unable to fetch the alarm list"
		case len(resp.Alarms) > 0:
			h.Health, h.Error = false, "Active Alarm(s): "
			for _, a := range resp.Alarms {
				switch a.Alarm {
				case pb.AlarmType_NOSPACE, pb.AlarmType_CORRUPT:
					h.Error += a.Alarm.String() + " "
				default:
					h.Error += "UNKNOWN "
				}
			}
		}
	}
	if err := r.display.(maintenancePrinter).EndpointHealth([]epHealth{h}); err != nil {
		return err
	}
	if h.Error != "" {
		return errors.New("unhealthy cluster")
	}
	return nil
}

// endpointHashKV prints HashKV at rev (0: the latest).
func (r *runner) endpointHashKV(rev int64) error {
	cc, _, err := r.clusterClient()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	resp, err := cc.HashKV(ctx, &pb.HashKVRequest{Revision: rev})
	cancel()
	var list []epHashKV
	if err != nil {
		fmt.Fprintf(r.stderr, "Failed to get the hash of endpoint %s (%v)\n", r.endpoint(), err)
	} else {
		list = append(list, epHashKV{Ep: r.endpoint(), Resp: resp})
	}
	if perr := r.display.(maintenancePrinter).EndpointHashKV(list); perr != nil {
		return perr
	}
	return err
}

// defragCommand runs "defrag": revd compacts its journal's storage.
func defragCommand(r *runner, fs *flagSet) func([]string) error {
	return func([]string) error {
		cc, _, err := r.clusterClient()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		start := time.Now()
		_, err = cc.Defragment(ctx, &pb.DefragmentRequest{})
		took := time.Since(start)
		cancel()
		if err != nil {
			fmt.Fprintf(r.stderr, "Failed to defragment etcd member[%s]. took %s. (%v)\n", r.endpoint(), took, err)
			return &exitErr{code: exitError, err: errSilent}
		}
		fmt.Fprintf(r.stdout, "Finished defragmenting etcd member[%s]. took %s\n", r.endpoint(), took)
		return nil
	}
}

func endpointHealthTable(hs []epHealth) (hdr []string, rows [][]string) {
	hdr = []string{"endpoint", "health", "took", "error"}
	for _, h := range hs {
		rows = append(rows, []string{h.Ep, strconv.FormatBool(h.Health), h.Took, h.Error})
	}
	return hdr, rows
}

func endpointHashKVTable(hs []epHashKV) (hdr []string, rows [][]string) {
	hdr = []string{"endpoint", "hash", "hash_revision"}
	for _, h := range hs {
		rows = append(rows, []string{h.Ep, fmt.Sprint(h.Resp.GetHash()), fmt.Sprint(h.Resp.GetHashRevision())})
	}
	return hdr, rows
}

// Simple: etcdctl's sentences for health (an unhealthy endpoint on
// stderr), the table's rows for hashkv.

func (s *simplePrinter) EndpointHealth(hs []epHealth) error {
	for _, h := range hs {
		if h.Error == "" {
			fmt.Fprintf(s.w, "%s is healthy: successfully committed proposal: took = %v\n", h.Ep, h.Took)
		} else {
			fmt.Fprintf(s.errw, "%s is unhealthy: failed to commit proposal: %v\n", h.Ep, h.Error)
		}
	}
	return nil
}

func (s *simplePrinter) EndpointHashKV(hs []epHashKV) error {
	_, rows := endpointHashKVTable(hs)
	for _, row := range rows {
		fmt.Fprintln(s.w, strings.Join(row, ", "))
	}
	return nil
}

func (p *jsonPrinter) EndpointHealth(hs []epHealth) error { return p.print(hs) }
func (p *jsonPrinter) EndpointHashKV(hs []epHashKV) error { return p.print(hs) }

func (p *fieldsPrinter) EndpointHealth(hs []epHealth) error {
	for _, h := range hs {
		fmt.Fprintf(p.w, "\"Endpoint\" : %q\n", h.Ep)
		fmt.Fprintln(p.w, `"Health" :`, h.Health)
		fmt.Fprintln(p.w, `"Took" :`, h.Took)
		fmt.Fprintln(p.w, `"Error" :`, h.Error)
		fmt.Fprintln(p.w)
	}
	return nil
}

func (p *fieldsPrinter) EndpointHashKV(hs []epHashKV) error {
	for _, h := range hs {
		p.hdr(h.Resp.GetHeader())
		fmt.Fprintf(p.w, "\"Endpoint\" : %q\n", h.Ep)
		fmt.Fprintln(p.w, `"Hash" :`, h.Resp.GetHash())
		fmt.Fprintln(p.w, `"HashRevision" :`, h.Resp.GetHashRevision())
		fmt.Fprintln(p.w)
	}
	return nil
}

func (p *pbPrinter) EndpointHealth([]epHealth) error { return errUnsupportedFormat("protobuf") }
func (p *pbPrinter) EndpointHashKV([]epHashKV) error { return errUnsupportedFormat("protobuf") }

func (t *tablePrinter) EndpointHealth(hs []epHealth) error {
	t.table(endpointHealthTable(hs))
	return nil
}

func (t *tablePrinter) EndpointHashKV(hs []epHashKV) error {
	t.table(endpointHashKVTable(hs))
	return nil
}
