package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// printer writes responses in one of etcdctl's output formats (-w). The
// formats and their text follow etcdctl 3.7's printers: simple (the
// default), json, fields, protobuf, and table (endpoint status only).
type printer interface {
	Get(*pb.RangeResponse) error
	Put(*pb.PutResponse) error
	Del(*pb.DeleteRangeResponse) error
	Txn(*pb.TxnResponse) error
	EndpointStatus([]epStatus) error
}

// epStatus is one endpoint's status; the JSON names are etcdctl's.
type epStatus struct {
	Ep   string             `json:"Endpoint"`
	Resp *pb.StatusResponse `json:"Status"`
}

// newPrinter returns the printer for format, or nil for an unknown format.
func newPrinter(format string, w, errw io.Writer, isHex bool) printer {
	switch format {
	case "simple":
		return &simplePrinter{w: w, errw: errw, isHex: isHex}
	case "json":
		return &jsonPrinter{w: w, errw: errw, isHex: isHex}
	case "fields":
		return &fieldsPrinter{w: w, isHex: isHex}
	case "protobuf":
		return &pbPrinter{w: w, errw: errw}
	case "table":
		return &tablePrinter{w: w}
	}
	return nil
}

func errUnsupportedFormat(format string) error {
	return exitErrorf(exitBadFeature, "%s not supported as output format", format)
}

// simplePrinter is etcdctl's default output: keys and values on lines of
// their own, "OK" for a put, the deleted count for a delete.
type simplePrinter struct {
	w, errw   io.Writer // errw: endpoint health's unhealthy lines
	isHex     bool
	valueOnly bool // get --print-value-only
}

func (s *simplePrinter) kv(kv *mvccpb.KeyValue) {
	k, v := string(kv.GetKey()), string(kv.GetValue())
	if s.isHex {
		k, v = hexBytes(kv.GetKey()), hexBytes(kv.GetValue())
	}
	if !s.valueOnly {
		fmt.Fprintln(s.w, k)
	}
	fmt.Fprintln(s.w, v)
}

// hexBytes writes b as "\x.." escapes, as etcdctl --hex does.
func hexBytes(b []byte) string {
	var sb strings.Builder
	for _, c := range []byte(hex.EncodeToString(b)) {
		if sb.Len()%4 == 0 {
			sb.WriteString(`\x`)
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

func (s *simplePrinter) Get(r *pb.RangeResponse) error {
	for _, kv := range r.GetKvs() {
		s.kv(kv)
	}
	return nil
}

func (s *simplePrinter) Put(r *pb.PutResponse) error {
	fmt.Fprintln(s.w, "OK")
	if r.GetPrevKv() != nil {
		s.kv(r.GetPrevKv())
	}
	return nil
}

func (s *simplePrinter) Del(r *pb.DeleteRangeResponse) error {
	fmt.Fprintln(s.w, r.GetDeleted())
	for _, kv := range r.GetPrevKvs() {
		s.kv(kv)
	}
	return nil
}

func (s *simplePrinter) Txn(r *pb.TxnResponse) error {
	if r.GetSucceeded() {
		fmt.Fprintln(s.w, "SUCCESS")
	} else {
		fmt.Fprintln(s.w, "FAILURE")
	}
	for _, op := range r.GetResponses() {
		fmt.Fprintln(s.w)
		switch v := op.GetResponse().(type) {
		case *pb.ResponseOp_ResponseRange:
			s.Get(v.ResponseRange)
		case *pb.ResponseOp_ResponsePut:
			s.Put(v.ResponsePut)
		case *pb.ResponseOp_ResponseDeleteRange:
			s.Del(v.ResponseDeleteRange)
		default:
			fmt.Fprintf(s.w, "unexpected response %+v\n", op)
		}
	}
	return nil
}

func (s *simplePrinter) EndpointStatus(st []epStatus) error {
	_, rows := endpointStatusTable(st)
	for _, row := range rows {
		fmt.Fprintln(s.w, strings.Join(row, ", "))
	}
	return nil
}

// jsonPrinter writes each response as one line of JSON, with the field
// names of the etcd messages and byte strings in base64, as etcdctl -w
// json does.
type jsonPrinter struct {
	w, errw io.Writer
	isHex   bool // member list only, as in etcdctl
}

func (p *jsonPrinter) print(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintln(p.errw, err) // etcdctl reports and carries on
		return nil
	}
	fmt.Fprintln(p.w, string(b))
	return nil
}

func (p *jsonPrinter) Get(r *pb.RangeResponse) error       { return p.print(r) }
func (p *jsonPrinter) Put(r *pb.PutResponse) error         { return p.print(r) }
func (p *jsonPrinter) Del(r *pb.DeleteRangeResponse) error { return p.print(r) }
func (p *jsonPrinter) Txn(r *pb.TxnResponse) error         { return p.print(txnJSON(r)) }
func (p *jsonPrinter) EndpointStatus(st []epStatus) error  { return p.print(st) }

// txnJSON is etcdctl's JSON shape for a TxnResponse: each response op as
// {"Response": {"response_range": ...}}.
type txnJSONResponse struct {
	Header    *pb.ResponseHeader `json:"header,omitempty"`
	Succeeded bool               `json:"succeeded,omitempty"`
	Responses []opJSON           `json:"responses,omitempty"`
}

type opJSON struct {
	Response opResponseJSON `json:"Response"`
}

type opResponseJSON struct {
	ResponseRange       *pb.RangeResponse       `json:"response_range,omitempty"`
	ResponsePut         *pb.PutResponse         `json:"response_put,omitempty"`
	ResponseDeleteRange *pb.DeleteRangeResponse `json:"response_delete_range,omitempty"`
	ResponseTxn         *txnJSONResponse        `json:"response_txn,omitempty"`
}

func txnJSON(r *pb.TxnResponse) *txnJSONResponse {
	out := &txnJSONResponse{Header: r.GetHeader(), Succeeded: r.GetSucceeded()}
	for _, op := range r.GetResponses() {
		var o opResponseJSON
		switch v := op.GetResponse().(type) {
		case *pb.ResponseOp_ResponseRange:
			o.ResponseRange = v.ResponseRange
		case *pb.ResponseOp_ResponsePut:
			o.ResponsePut = v.ResponsePut
		case *pb.ResponseOp_ResponseDeleteRange:
			o.ResponseDeleteRange = v.ResponseDeleteRange
		case *pb.ResponseOp_ResponseTxn:
			o.ResponseTxn = txnJSON(v.ResponseTxn)
		}
		out.Responses = append(out.Responses, opJSON{Response: o})
	}
	return out
}

// pbPrinter writes the response message's protobuf encoding.
type pbPrinter struct{ w, errw io.Writer }

func (p *pbPrinter) print(m proto.Message) error {
	b, err := proto.Marshal(m)
	if err != nil {
		fmt.Fprintln(p.errw, err)
		return nil
	}
	_, err = p.w.Write(b)
	return err
}

func (p *pbPrinter) Get(r *pb.RangeResponse) error       { return p.print(r) }
func (p *pbPrinter) Put(r *pb.PutResponse) error         { return p.print(r) }
func (p *pbPrinter) Del(r *pb.DeleteRangeResponse) error { return p.print(r) }
func (p *pbPrinter) Txn(r *pb.TxnResponse) error         { return p.print(r) }
func (p *pbPrinter) EndpointStatus([]epStatus) error     { return errUnsupportedFormat("protobuf") }

// fieldsPrinter writes one `"Name" : value` line per field.
type fieldsPrinter struct {
	w     io.Writer
	isHex bool
}

func (p *fieldsPrinter) hdr(h *pb.ResponseHeader) {
	if p.isHex {
		fmt.Fprintln(p.w, `"ClusterID" :`, strconv.FormatUint(h.GetClusterId(), 16))
		fmt.Fprintln(p.w, `"MemberID" :`, strconv.FormatUint(h.GetMemberId(), 16))
	} else {
		fmt.Fprintln(p.w, `"ClusterID" :`, h.GetClusterId())
		fmt.Fprintln(p.w, `"MemberID" :`, h.GetMemberId())
	}
	if h.GetRevision() > 0 {
		fmt.Fprintln(p.w, `"Revision" :`, h.GetRevision())
	}
	fmt.Fprintln(p.w, `"RaftTerm" :`, h.GetRaftTerm())
}

func (p *fieldsPrinter) kv(pfx string, kv *mvccpb.KeyValue) {
	fmt.Fprintf(p.w, "\"%sKey\" : %q\n", pfx, string(kv.GetKey()))
	fmt.Fprintf(p.w, "\"%sCreateRevision\" : %d\n", pfx, kv.GetCreateRevision())
	fmt.Fprintf(p.w, "\"%sModRevision\" : %d\n", pfx, kv.GetModRevision())
	fmt.Fprintf(p.w, "\"%sVersion\" : %d\n", pfx, kv.GetVersion())
	fmt.Fprintf(p.w, "\"%sValue\" : %q\n", pfx, string(kv.GetValue()))
	if p.isHex {
		fmt.Fprintf(p.w, "\"%sLease\" : %016x\n", pfx, kv.GetLease())
	} else {
		fmt.Fprintf(p.w, "\"%sLease\" : %d\n", pfx, kv.GetLease())
	}
}

func (p *fieldsPrinter) Get(r *pb.RangeResponse) error {
	p.hdr(r.GetHeader())
	for _, kv := range r.GetKvs() {
		p.kv("", kv)
	}
	fmt.Fprintln(p.w, `"More" :`, r.GetMore())
	fmt.Fprintln(p.w, `"Count" :`, r.GetCount())
	return nil
}

func (p *fieldsPrinter) Put(r *pb.PutResponse) error {
	p.hdr(r.GetHeader())
	if r.GetPrevKv() != nil {
		p.kv("Prev", r.GetPrevKv())
	}
	return nil
}

func (p *fieldsPrinter) Del(r *pb.DeleteRangeResponse) error {
	p.hdr(r.GetHeader())
	fmt.Fprintln(p.w, `"Deleted" :`, r.GetDeleted())
	for _, kv := range r.GetPrevKvs() {
		p.kv("Prev", kv)
	}
	return nil
}

func (p *fieldsPrinter) Txn(r *pb.TxnResponse) error {
	p.hdr(r.GetHeader())
	fmt.Fprintln(p.w, `"Succeeded" :`, r.GetSucceeded())
	for _, op := range r.GetResponses() {
		switch v := op.GetResponse().(type) {
		case *pb.ResponseOp_ResponseRange:
			p.Get(v.ResponseRange)
		case *pb.ResponseOp_ResponsePut:
			p.Put(v.ResponsePut)
		case *pb.ResponseOp_ResponseDeleteRange:
			p.Del(v.ResponseDeleteRange)
		default:
			fmt.Fprintf(p.w, "\"Unknown\" : %q\n", fmt.Sprintf("%+v", v))
		}
	}
	return nil
}

func (p *fieldsPrinter) EndpointStatus(st []epStatus) error {
	for _, ep := range st {
		r := ep.Resp
		p.hdr(r.GetHeader())
		fmt.Fprintf(p.w, "\"Version\" : %q\n", r.GetVersion())
		fmt.Fprintf(p.w, "\"StorageVersion\" : %q\n", r.GetStorageVersion())
		fmt.Fprintln(p.w, `"DBSize" :`, r.GetDbSize())
		fmt.Fprintln(p.w, `"DBSizeInUse" :`, r.GetDbSizeInUse())
		fmt.Fprintln(p.w, `"DBSizeQuota" :`, r.GetDbSizeQuota())
		fmt.Fprintln(p.w, `"Leader" :`, r.GetLeader())
		fmt.Fprintln(p.w, `"IsLearner" :`, r.GetIsLearner())
		fmt.Fprintln(p.w, `"RaftIndex" :`, r.GetRaftIndex())
		fmt.Fprintln(p.w, `"RaftAppliedIndex" :`, r.GetRaftAppliedIndex())
		fmt.Fprintln(p.w, `"Errors" :`, r.GetErrors())
		fmt.Fprintf(p.w, "\"Endpoint\" : %q\n", ep.Ep)
		fmt.Fprintf(p.w, "\"DowngradeTargetVersion\" : %q\n", r.GetDowngradeInfo().GetTargetVersion())
		fmt.Fprintln(p.w, `"DowngradeEnabled" :`, r.GetDowngradeInfo().GetEnabled())
		fmt.Fprintln(p.w)
	}
	return nil
}
