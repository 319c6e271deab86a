package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// endpointStatusTable is etcdctl's table of Maintenance.Status responses.
func endpointStatusTable(st []epStatus) (hdr []string, rows [][]string) {
	hdr = []string{
		"endpoint", "ID", "version", "storage version", "db size", "in use", "percentage not in use", "quota",
		"is leader", "is learner", "raft term", "raft index", "raft applied index", "errors",
		"downgrade target version", "downgrade enabled",
	}
	for _, s := range st {
		r := s.Resp
		rows = append(rows, []string{
			s.Ep,
			fmt.Sprintf("%x", r.GetHeader().GetMemberId()),
			r.GetVersion(),
			r.GetStorageVersion(),
			humanBytes(uint64(r.GetDbSize())),
			humanBytes(uint64(r.GetDbSizeInUse())),
			notInUse(r),
			humanBytes(uint64(r.GetDbSizeQuota())),
			fmt.Sprint(r.GetLeader() == r.GetHeader().GetMemberId()),
			fmt.Sprint(r.GetIsLearner()),
			fmt.Sprint(r.GetRaftTerm()),
			fmt.Sprint(r.GetRaftIndex()),
			fmt.Sprint(r.GetRaftAppliedIndex()),
			strings.Join(r.GetErrors(), ", "),
			r.GetDowngradeInfo().GetTargetVersion(),
			strconv.FormatBool(r.GetDowngradeInfo().GetEnabled()),
		})
	}
	return hdr, rows
}

// notInUse is the share of the database file not in use, in whole percent
// as etcdctl computes it. etcdctl divides by zero on an empty size; we
// print 0%.
func notInUse(r *pb.StatusResponse) string {
	if r.GetDbSize() == 0 {
		return "0%"
	}
	return fmt.Sprintf("%d%%", 100-(r.GetDbSizeInUse()*100/r.GetDbSize()))
}

// humanBytes formats n in SI units as go-humanize's Bytes does (etcdctl's
// choice): "0 B", "25 kB", "2.1 GB".
func humanBytes(n uint64) string {
	if n < 10 {
		return fmt.Sprintf("%d B", n)
	}
	sizes := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	e := math.Floor(math.Log(float64(n)) / math.Log(1000))
	val := math.Floor(float64(n)/math.Pow(1000, e)*10+0.5) / 10
	if val < 10 {
		return fmt.Sprintf("%.1f %s", val, sizes[int(e)])
	}
	return fmt.Sprintf("%.0f %s", val, sizes[int(e)])
}

// tablePrinter draws etcdctl's -w table boxes: headers upper-cased and
// centred, cells right-aligned.
type tablePrinter struct{ w io.Writer }

func (p *tablePrinter) Get(*pb.RangeResponse) error       { return errUnsupportedFormat("table") }
func (p *tablePrinter) Put(*pb.PutResponse) error         { return errUnsupportedFormat("table") }
func (p *tablePrinter) Del(*pb.DeleteRangeResponse) error { return errUnsupportedFormat("table") }
func (p *tablePrinter) Txn(*pb.TxnResponse) error         { return errUnsupportedFormat("table") }

func (p *tablePrinter) EndpointStatus(st []epStatus) error {
	hdr, rows := endpointStatusTable(st)
	p.table(hdr, rows)
	return nil
}

func (p *tablePrinter) table(hdr []string, rows [][]string) {
	titles := make([]string, len(hdr))
	widths := make([]int, len(hdr))
	for i, h := range hdr {
		titles[i] = strings.ToUpper(strings.TrimSpace(strings.ReplaceAll(h, "_", " ")))
		widths[i] = utf8.RuneCountInString(titles[i])
	}
	trimmed := make([][]string, len(rows))
	for r, row := range rows {
		trimmed[r] = make([]string, len(row))
		for i, c := range row {
			c = strings.TrimSpace(c) // as etcdctl's tablewriter draws cells
			trimmed[r][i] = c
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	rows = trimmed
	rule := func(left, mid, right string) {
		parts := make([]string, len(widths))
		for i, w := range widths {
			parts[i] = strings.Repeat("─", w+2)
		}
		fmt.Fprintln(p.w, left+strings.Join(parts, mid)+right)
	}
	line := func(cells []string, align func(s string, w int) string) {
		parts := make([]string, len(widths))
		for i, w := range widths {
			parts[i] = " " + align(cells[i], w) + " "
		}
		fmt.Fprintln(p.w, "│"+strings.Join(parts, "│")+"│")
	}
	center := func(s string, w int) string {
		gap := w - utf8.RuneCountInString(s)
		return strings.Repeat(" ", gap/2) + s + strings.Repeat(" ", gap-gap/2)
	}
	right := func(s string, w int) string {
		return strings.Repeat(" ", w-utf8.RuneCountInString(s)) + s
	}

	rule("┌", "┬", "┐")
	line(titles, center)
	if len(rows) > 0 {
		rule("├", "┼", "┤")
		for _, row := range rows {
			line(row, right)
		}
	}
	rule("└", "┴", "┘")
}
