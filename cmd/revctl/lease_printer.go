package main

import (
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/encoding/prototext"
)

// leasePrinter prints lease responses as etcdctl 3.7.3's printers do; every
// printer of newPrinter has it.
type leasePrinter interface {
	Grant(*pb.LeaseGrantResponse) error
	Revoke(id int64, r *pb.LeaseRevokeResponse) error
	KeepAlive(*pb.LeaseKeepAliveResponse) error
	TimeToLive(r *pb.LeaseTimeToLiveResponse, keys bool) error
	Leases(*pb.LeaseLeasesResponse) error
}

var (
	_ leasePrinter = (*simplePrinter)(nil)
	_ leasePrinter = (*jsonPrinter)(nil)
	_ leasePrinter = (*fieldsPrinter)(nil)
	_ leasePrinter = (*pbPrinter)(nil)
	_ leasePrinter = (*tablePrinter)(nil)
)

// Simple: etcdctl's one-line sentences.

func (s *simplePrinter) Grant(r *pb.LeaseGrantResponse) error {
	fmt.Fprintf(s.w, "lease %016x granted with TTL(%ds)\n", r.ID, r.TTL)
	return nil
}

func (s *simplePrinter) Revoke(id int64, _ *pb.LeaseRevokeResponse) error {
	fmt.Fprintf(s.w, "lease %016x revoked\n", id)
	return nil
}

func (s *simplePrinter) KeepAlive(r *pb.LeaseKeepAliveResponse) error {
	fmt.Fprintf(s.w, "lease %016x keepalived with TTL(%d)\n", r.ID, r.TTL)
	return nil
}

func (s *simplePrinter) TimeToLive(r *pb.LeaseTimeToLiveResponse, keys bool) error {
	if r.GrantedTTL == 0 && r.TTL == -1 {
		fmt.Fprintf(s.w, "lease %016x already expired\n", r.ID)
		return nil
	}
	txt := fmt.Sprintf("lease %016x granted with TTL(%ds), remaining(%ds)", r.ID, r.GrantedTTL, r.TTL)
	if keys {
		ks := make([]string, len(r.Keys))
		for i, k := range r.Keys {
			ks[i] = string(k)
		}
		txt += fmt.Sprintf(", attached keys(%v)", ks)
	}
	fmt.Fprintln(s.w, txt)
	return nil
}

func (s *simplePrinter) Leases(r *pb.LeaseLeasesResponse) error {
	fmt.Fprintf(s.w, "found %d leases\n", len(r.Leases))
	for _, l := range r.Leases {
		fmt.Fprintf(s.w, "%016x\n", l.ID)
	}
	return nil
}

// JSON: etcdctl marshals clientv3's wrapper types, which embed the header
// (so its fields sit at the top level) and name their own fields as below.
// --hex changes nothing here.

type leaseGrantJSON struct {
	*pb.ResponseHeader
	ID    int64
	TTL   int64
	Error string
}

type leaseKeepAliveJSON struct {
	*pb.ResponseHeader
	ID  int64
	TTL int64
}

type leaseTimeToLiveJSON struct {
	*pb.ResponseHeader
	ID         int64    `json:"id"`
	TTL        int64    `json:"ttl"`
	GrantedTTL int64    `json:"granted-ttl"`
	Keys       [][]byte `json:"keys"`
}

type leaseStatusJSON struct {
	ID int64 `json:"id"`
}

type leaseLeasesJSON struct {
	*pb.ResponseHeader
	Leases []leaseStatusJSON `json:"leases"`
}

func (p *jsonPrinter) Grant(r *pb.LeaseGrantResponse) error {
	return p.print(leaseGrantJSON{ResponseHeader: r.Header, ID: r.ID, TTL: r.TTL, Error: r.Error})
}

func (p *jsonPrinter) Revoke(_ int64, r *pb.LeaseRevokeResponse) error { return p.print(r) }

func (p *jsonPrinter) KeepAlive(r *pb.LeaseKeepAliveResponse) error {
	return p.print(leaseKeepAliveJSON{ResponseHeader: r.Header, ID: r.ID, TTL: r.TTL})
}

func (p *jsonPrinter) TimeToLive(r *pb.LeaseTimeToLiveResponse, _ bool) error {
	return p.print(leaseTimeToLiveJSON{ResponseHeader: r.Header, ID: r.ID, TTL: r.TTL, GrantedTTL: r.GrantedTTL, Keys: r.Keys})
}

func (p *jsonPrinter) Leases(r *pb.LeaseLeasesResponse) error {
	ls := make([]leaseStatusJSON, len(r.Leases))
	for i, l := range r.Leases {
		ls[i] = leaseStatusJSON{ID: l.ID}
	}
	return p.print(leaseLeasesJSON{ResponseHeader: r.Header, Leases: ls})
}

// Fields: the header, then one line per field; --hex prints IDs in hex.

func (p *fieldsPrinter) id(id int64) {
	if p.isHex {
		fmt.Fprintf(p.w, "\"ID\" : %016x\n", id)
	} else {
		fmt.Fprintln(p.w, `"ID" :`, id)
	}
}

func (p *fieldsPrinter) Grant(r *pb.LeaseGrantResponse) error {
	p.hdr(r.Header)
	p.id(r.ID)
	fmt.Fprintln(p.w, `"TTL" :`, r.TTL)
	return nil
}

func (p *fieldsPrinter) Revoke(_ int64, r *pb.LeaseRevokeResponse) error {
	p.hdr(r.Header)
	return nil
}

func (p *fieldsPrinter) KeepAlive(r *pb.LeaseKeepAliveResponse) error {
	p.hdr(r.Header)
	p.id(r.ID)
	fmt.Fprintln(p.w, `"TTL" :`, r.TTL)
	return nil
}

func (p *fieldsPrinter) TimeToLive(r *pb.LeaseTimeToLiveResponse, _ bool) error {
	p.hdr(r.Header)
	p.id(r.ID)
	fmt.Fprintln(p.w, `"TTL" :`, r.TTL)
	fmt.Fprintln(p.w, `"GrantedTTL" :`, r.GrantedTTL)
	for _, k := range r.Keys {
		fmt.Fprintf(p.w, "\"Key\" : %q\n", string(k))
	}
	return nil
}

func (p *fieldsPrinter) Leases(r *pb.LeaseLeasesResponse) error {
	p.hdr(r.Header)
	for _, l := range r.Leases {
		p.id(l.ID)
	}
	return nil
}

// Protobuf: etcdctl marshals clientv3's wrapper types with proto.Marshal;
// they are proto messages only through their embedded header, so what comes
// out is the header's encoding alone. Its LeaseRevokeResponse wrapper has no
// embedded header and is refused.

func (p *pbPrinter) Grant(r *pb.LeaseGrantResponse) error { return p.print(hdrOrEmpty(r.Header)) }
func (p *pbPrinter) KeepAlive(r *pb.LeaseKeepAliveResponse) error {
	return p.print(hdrOrEmpty(r.Header))
}
func (p *pbPrinter) TimeToLive(r *pb.LeaseTimeToLiveResponse, _ bool) error {
	return p.print(hdrOrEmpty(r.Header))
}
func (p *pbPrinter) Leases(r *pb.LeaseLeasesResponse) error { return p.print(hdrOrEmpty(r.Header)) }

func (p *pbPrinter) Revoke(_ int64, r *pb.LeaseRevokeResponse) error {
	hdr, _ := prototext.MarshalOptions{}.Marshal(hdrOrEmpty(r.Header))
	return exitErrorf(exitBadFeature, "marshal unsupported for type *clientv3.LeaseRevokeResponse (&{%s})", hdr)
}

func hdrOrEmpty(h *pb.ResponseHeader) *pb.ResponseHeader {
	if h == nil {
		return &pb.ResponseHeader{}
	}
	return h
}

// Table: etcdctl has no table output for leases.

func (t *tablePrinter) Grant(*pb.LeaseGrantResponse) error { return errUnsupportedFormat("table") }
func (t *tablePrinter) Revoke(int64, *pb.LeaseRevokeResponse) error {
	return errUnsupportedFormat("table")
}
func (t *tablePrinter) KeepAlive(*pb.LeaseKeepAliveResponse) error {
	return errUnsupportedFormat("table")
}
func (t *tablePrinter) TimeToLive(*pb.LeaseTimeToLiveResponse, bool) error {
	return errUnsupportedFormat("table")
}
func (t *tablePrinter) Leases(*pb.LeaseLeasesResponse) error { return errUnsupportedFormat("table") }
