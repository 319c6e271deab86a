package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// clusterClient is what member list, the alarm commands, endpoint health
// and hashkv and defrag need; *natsclient.Client has it.
type clusterClient interface {
	MemberList(context.Context, *pb.MemberListRequest) (*pb.MemberListResponse, error)
	Alarm(context.Context, *pb.AlarmRequest) (*pb.AlarmResponse, error)
	HashKV(context.Context, *pb.HashKVRequest) (*pb.HashKVResponse, error)
	Defragment(context.Context, *pb.DefragmentRequest) (*pb.DefragmentResponse, error)
}

// clusterPrinter prints member lists and alarms as etcdctl 3.7.3's
// printers do; every printer of newPrinter has it.
type clusterPrinter interface {
	MemberList(*pb.MemberListResponse) error
	Alarm(*pb.AlarmResponse) error
}

var (
	_ clusterPrinter = (*simplePrinter)(nil)
	_ clusterPrinter = (*jsonPrinter)(nil)
	_ clusterPrinter = (*fieldsPrinter)(nil)
	_ clusterPrinter = (*pbPrinter)(nil)
	_ clusterPrinter = (*tablePrinter)(nil)
)

func (r *runner) clusterClient() (clusterClient, clusterPrinter, error) {
	kv, err := r.client()
	if err != nil {
		return nil, nil, err
	}
	cc, ok := kv.(clusterClient)
	if !ok {
		return nil, nil, errors.New("this client cannot send cluster or alarm requests")
	}
	return cc, r.display.(clusterPrinter), nil
}

// memberCommand runs "member list", etcdctl's. The subcommands that change
// membership are etcdctl's (member add, remove, update, promote), which
// work against revd unchanged; revctl does not repeat them.
func memberCommand(r *runner, fs *flagSet) func([]string) error {
	var consistency string
	fs.fs.StringVar(&consistency, "consistency", "l", "Linearizable(l) or Serializable(s)")
	return func(args []string) error {
		if len(args) == 0 {
			r.usage([]string{"member"})
			return nil
		}
		if subcommand(args[0], "list") == "" {
			return fmt.Errorf("unknown command %q for \"revctl member\"", args[0])
		}
		// etcdctl's IsSerializable, whose message names the get command's
		// flag by mistake ("l"); revctl names the value given.
		switch consistency {
		case "s", "l":
		default:
			return exitErrorf(exitBadFeature, "unknown consistency flag %q", consistency)
		}
		cc, p, err := r.clusterClient()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		resp, err := cc.MemberList(ctx, &pb.MemberListRequest{Linearizable: consistency != "s"})
		cancel()
		if err != nil {
			return err
		}
		return p.MemberList(resp)
	}
}

// alarmCommand runs "alarm list" and "alarm disarm" as etcdctl does;
// disarm, like etcd's client, lists the alarms and disarms each, and
// prints what it disarmed (with no header).
func alarmCommand(r *runner, fs *flagSet) func([]string) error {
	return func(args []string) error {
		if len(args) == 0 {
			r.usage([]string{"alarm"})
			return nil
		}
		sub := subcommand(args[0], "disarm", "list")
		if sub == "" {
			return fmt.Errorf("unknown command %q for \"revctl alarm\"", args[0])
		}
		if len(args) > 1 {
			return &exitErr{code: exitBadArgs, err: fmt.Errorf("alarm %s command accepts no arguments", sub)}
		}
		cc, p, err := r.clusterClient()
		if err != nil {
			return err
		}
		ctx, cancel := r.ctx()
		defer cancel()
		list, err := cc.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_GET})
		if err != nil {
			return err
		}
		if sub == "list" {
			return p.Alarm(list)
		}
		disarmed := &pb.AlarmResponse{}
		for _, a := range list.Alarms {
			resp, err := cc.Alarm(ctx, &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE, MemberID: a.MemberID, Alarm: a.Alarm})
			if err != nil {
				return err
			}
			disarmed.Alarms = append(disarmed.Alarms, resp.Alarms...)
		}
		return p.Alarm(disarmed)
	}
}

// memberListTable is etcdctl's makeMemberListTable.
func memberListTable(r *pb.MemberListResponse) (hdr []string, rows [][]string) {
	hdr = []string{"ID", "Status", "Name", "Peer Addrs", "Client Addrs", "Is Learner"}
	for _, m := range r.GetMembers() {
		status := "started"
		if m.Name == "" {
			status = "unstarted"
		}
		rows = append(rows, []string{
			strconv.FormatUint(m.ID, 16), status, m.Name,
			strings.Join(m.PeerURLs, ","), strings.Join(m.ClientURLs, ","), strconv.FormatBool(m.IsLearner),
		})
	}
	return hdr, rows
}

// Simple: the member list's table rows, comma-separated; each alarm in
// its text form.

func (s *simplePrinter) MemberList(r *pb.MemberListResponse) error {
	_, rows := memberListTable(r)
	for _, row := range rows {
		fmt.Fprintln(s.w, strings.Join(row, ", "))
	}
	return nil
}

func (s *simplePrinter) Alarm(r *pb.AlarmResponse) error {
	for _, a := range r.GetAlarms() {
		fmt.Fprintf(s.w, "%+v\n", a)
	}
	return nil
}

// JSON: the messages as they are; with --hex, the member list's IDs in
// hex strings (etcdctl's HexResponseHeader and HexMember).

type hexHeaderJSON struct {
	ClusterID string `json:"cluster_id"`
	MemberID  string `json:"member_id"`
	Revision  int64  `json:"revision,omitempty"`
	RaftTerm  uint64 `json:"raft_term,omitempty"`
}

type hexMemberJSON struct {
	ID         string   `json:"ID"`
	Name       string   `json:"name,omitempty"`
	PeerURLs   []string `json:"peerURLs,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	IsLearner  bool     `json:"isLearner,omitempty"`
}

func (p *jsonPrinter) MemberList(r *pb.MemberListResponse) error {
	if !p.isHex {
		return p.print(r)
	}
	out := struct {
		Header  *hexHeaderJSON   `json:"header"`
		Members []*hexMemberJSON `json:"members"`
	}{Members: make([]*hexMemberJSON, len(r.Members))}
	if h := r.Header; h != nil {
		out.Header = &hexHeaderJSON{ClusterID: strconv.FormatUint(h.ClusterId, 16), MemberID: strconv.FormatUint(h.MemberId, 16), Revision: h.Revision, RaftTerm: h.RaftTerm}
	}
	for i, m := range r.Members {
		var hm *hexMemberJSON
		if m != nil {
			hm = &hexMemberJSON{ID: strconv.FormatUint(m.ID, 16), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
		}
		out.Members[i] = hm
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	fmt.Fprintln(p.w, string(b))
	return nil
}

func (p *jsonPrinter) Alarm(r *pb.AlarmResponse) error { return p.print(r) }

// Fields: the header, then one line per field, a blank line after each
// member or alarm.

func (p *fieldsPrinter) hexOrDec(name string, id uint64) {
	if p.isHex {
		fmt.Fprintf(p.w, "%q : %s\n", name, strconv.FormatUint(id, 16))
	} else {
		fmt.Fprintf(p.w, "%q : %d\n", name, id)
	}
}

func (p *fieldsPrinter) MemberList(r *pb.MemberListResponse) error {
	p.hdr(r.GetHeader())
	for _, m := range r.GetMembers() {
		p.hexOrDec("ID", m.GetID())
		fmt.Fprintf(p.w, "\"Name\" : %q\n", m.GetName())
		for _, u := range m.GetPeerURLs() {
			fmt.Fprintf(p.w, "\"PeerURL\" : %q\n", u)
		}
		for _, u := range m.GetClientURLs() {
			fmt.Fprintf(p.w, "\"ClientURL\" : %q\n", u)
		}
		fmt.Fprintln(p.w, `"IsLearner" :`, m.GetIsLearner())
		fmt.Fprintln(p.w)
	}
	return nil
}

func (p *fieldsPrinter) Alarm(r *pb.AlarmResponse) error {
	p.hdr(r.GetHeader())
	for _, a := range r.GetAlarms() {
		p.hexOrDec("MemberID", a.GetMemberID())
		fmt.Fprintln(p.w, `"AlarmType" :`, a.GetAlarm())
		fmt.Fprintln(p.w)
	}
	return nil
}

// Protobuf: the messages' encodings.

func (p *pbPrinter) MemberList(r *pb.MemberListResponse) error { return p.print(r) }
func (p *pbPrinter) Alarm(r *pb.AlarmResponse) error           { return p.print(r) }

// Table: the member list only, as in etcdctl.

func (t *tablePrinter) MemberList(r *pb.MemberListResponse) error {
	t.table(memberListTable(r))
	return nil
}

func (t *tablePrinter) Alarm(*pb.AlarmResponse) error { return errUnsupportedFormat("table") }

// subcommand is the one of names that arg names exactly or as an
// unambiguous prefix (cobra's prefix matching, which etcdctl enables); ""
// if none.
func subcommand(arg string, names ...string) string {
	var match string
	for _, n := range names {
		switch {
		case n == arg:
			return n
		case arg != "" && strings.HasPrefix(n, arg):
			if match != "" {
				return ""
			}
			match = n
		}
	}
	return match
}
