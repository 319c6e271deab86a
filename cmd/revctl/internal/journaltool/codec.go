package journaltool

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"revd/journal"
	journalv1 "revd/protos/revd/journal/v1"
)

// Format is the encoding of an export.
type Format int

const (
	// JSONL is JSON lines (see the package doc).
	JSONL Format = iota
	// Proto is length-delimited protobuf messages.
	Proto
)

// ParseFormat reads "jsonl" or "proto".
func ParseFormat(s string) (Format, error) {
	switch s {
	case "jsonl":
		return JSONL, nil
	case "proto":
		return Proto, nil
	}
	return 0, fmt.Errorf("journaltool: unknown export format %q (want jsonl or proto)", s)
}

func (f Format) String() string {
	if f == Proto {
		return "proto"
	}
	return "jsonl"
}

// ErrBadExport is returned (wrapped) for an export file that cannot be
// read: not an export, damaged, truncated, or inconsistent.
var ErrBadExport = errors.New("journaltool: bad export file")

// maxMessage bounds one length-delimited message (a record is at most a
// few MiB: etcd's request limit).
const maxMessage = 256 << 20

// readChunk is how much of a message readMessage reads at a time.
const readChunk = 1 << 20

// encoder writes one export.
type encoder interface {
	header(Header) error
	snapshot(*mvccpb.KeyValue) error
	record(journal.Record) error
}

func newEncoder(w io.Writer, f Format) encoder {
	if f == Proto {
		return &protoEncoder{w: w}
	}
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return &jsonEncoder{enc: e}
}

// JSON lines. Field order is struct order, so the bytes are canonical.

type jsonHeader struct {
	Kind             string      `json:"kind"`
	Format           string      `json:"format"`
	ClusterID        uint64      `json:"cluster_id"`
	MemberID         uint64      `json:"member_id"`
	SnapshotRevision int64       `json:"snapshot_revision"`
	CompactRevision  int64       `json:"compact_revision"`
	LastRevision     int64       `json:"last_revision"`
	SnapshotKeys     int64       `json:"snapshot_keys"`
	Prefix           *string     `json:"prefix,omitempty"`
	PrefixB64        string      `json:"prefix_b64"`
	Leases           []jsonLease `json:"leases,omitempty"`
	Auth             *jsonAuth   `json:"auth,omitempty"`
}

type jsonAuth struct {
	Enabled  bool     `json:"enabled"`
	Revision uint64   `json:"revision"`
	UsersB64 []string `json:"users_b64,omitempty"`
	RolesB64 []string `json:"roles_b64,omitempty"`
}

type jsonLease struct {
	ID  int64 `json:"id"`
	TTL int64 `json:"ttl"`
}

type jsonSnapshot struct {
	Kind string `json:"kind"`
	jsonKV
}

type jsonEvent struct {
	Kind     string `json:"kind"`
	Revision int64  `json:"revision"`
	Type     string `json:"type"`
	jsonKV
}

type jsonEmpty struct {
	Kind     string `json:"kind"`
	Revision int64  `json:"revision"`
}

type jsonKV struct {
	Key            *string `json:"key,omitempty"`
	KeyB64         string  `json:"key_b64"`
	Value          *string `json:"value,omitempty"`
	ValueB64       string  `json:"value_b64"`
	CreateRevision int64   `json:"create_revision"`
	ModRevision    int64   `json:"mod_revision"`
	Version        int64   `json:"version"`
	Lease          int64   `json:"lease"`
}

const (
	kindHeader   = "header"
	kindSnapshot = "snapshot"
	kindEvent    = "event"
	kindEmpty    = "empty"
)

// text returns b as a JSON string when it is valid UTF-8, else nil.
func text(b []byte) *string {
	if !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	return &s
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func toJSONKV(kv *mvccpb.KeyValue) jsonKV {
	return jsonKV{
		Key: text(kv.Key), KeyB64: b64(kv.Key), Value: text(kv.Value), ValueB64: b64(kv.Value),
		CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision, Version: kv.Version, Lease: kv.Lease,
	}
}

type jsonEncoder struct{ enc *json.Encoder }

func (e *jsonEncoder) header(h Header) error {
	jh := jsonHeader{Kind: kindHeader, Format: FormatName, ClusterID: h.ClusterID, MemberID: h.MemberID,
		SnapshotRevision: h.SnapshotRev, CompactRevision: h.CompactRev, LastRevision: h.LastRev,
		SnapshotKeys: h.SnapshotKeys, PrefixB64: b64(h.Prefix)}
	if len(h.Prefix) > 0 {
		jh.Prefix = text(h.Prefix)
	}
	for _, l := range h.Leases {
		jh.Leases = append(jh.Leases, jsonLease{ID: l.ID, TTL: l.TTL})
	}
	if h.Auth != nil {
		users, roles, err := marshalAuth(h.Auth)
		if err != nil {
			return err
		}
		jh.Auth = &jsonAuth{Enabled: h.Auth.Enabled, Revision: h.Auth.Revision}
		for _, u := range users {
			jh.Auth.UsersB64 = append(jh.Auth.UsersB64, b64(u))
		}
		for _, r := range roles {
			jh.Auth.RolesB64 = append(jh.Auth.RolesB64, b64(r))
		}
	}
	return e.enc.Encode(jh)
}

func (e *jsonEncoder) snapshot(kv *mvccpb.KeyValue) error {
	return e.enc.Encode(jsonSnapshot{Kind: kindSnapshot, jsonKV: toJSONKV(kv)})
}

func (e *jsonEncoder) record(rec journal.Record) error {
	if len(rec.Events) == 0 {
		return e.enc.Encode(jsonEmpty{Kind: kindEmpty, Revision: rec.Revision})
	}
	for _, ev := range rec.Events {
		if err := e.enc.Encode(jsonEvent{Kind: kindEvent, Revision: rec.Revision, Type: ev.Type.String(),
			jsonKV: toJSONKV(ev.Kv)}); err != nil {
			return err
		}
	}
	return nil
}

// Length-delimited protobuf.

type protoEncoder struct {
	w   io.Writer
	buf []byte
}

// write writes msg behind its varint length.
func (e *protoEncoder) write(msg []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := e.w.Write(protowire.AppendVarint(n[:0], uint64(len(msg)))); err != nil {
		return err
	}
	_, err := e.w.Write(msg)
	return err
}

func exportLeases(ls []journal.LeaseRecord) []*journalv1.ExportLease {
	var out []*journalv1.ExportLease
	for _, l := range ls {
		out = append(out, &journalv1.ExportLease{Id: l.ID, Ttl: l.TTL})
	}
	return out
}

func (e *protoEncoder) header(h Header) error {
	ph := &journalv1.ExportHeader{
		Format: FormatName, ClusterId: h.ClusterID, MemberId: h.MemberID,
		SnapshotRevision: h.SnapshotRev, CompactRevision: h.CompactRev, LastRevision: h.LastRev,
		SnapshotKeys: h.SnapshotKeys, Prefix: h.Prefix, Leases: exportLeases(h.Leases),
	}
	if h.Auth != nil {
		users, roles, err := marshalAuth(h.Auth)
		if err != nil {
			return err
		}
		ph.Auth = &journalv1.ExportAuth{Enabled: h.Auth.Enabled, Revision: h.Auth.Revision, Users: users, Roles: roles}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ph)
	if err != nil {
		return err
	}
	return e.write(b)
}

// marshalAuth returns the bytes of st's users and roles, etcd's authpb
// messages as the journal stores them.
func marshalAuth(st *journal.AuthState) (users, roles [][]byte, err error) {
	m := proto.MarshalOptions{Deterministic: true}
	for _, u := range st.Users {
		b, err := m.Marshal(u)
		if err != nil {
			return nil, nil, fmt.Errorf("auth: user %q: %w", u.Name, err)
		}
		users = append(users, b)
	}
	for _, r := range st.Roles {
		b, err := m.Marshal(r)
		if err != nil {
			return nil, nil, fmt.Errorf("auth: role %q: %w", r.Name, err)
		}
		roles = append(roles, b)
	}
	return users, roles, nil
}

// unmarshalAuth decodes an export's auth store and checks it
// (journal.AuthState.Check).
func unmarshalAuth(enabled bool, revision uint64, users, roles [][]byte) (*journal.AuthState, error) {
	st := &journal.AuthState{Enabled: enabled, Revision: revision}
	for i, b := range users {
		u := new(authpb.User)
		if err := proto.Unmarshal(b, u); err != nil {
			return nil, fmt.Errorf("user %d: %v", i+1, err)
		}
		st.Users = append(st.Users, u)
	}
	for i, b := range roles {
		r := new(authpb.Role)
		if err := proto.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("role %d: %v", i+1, err)
		}
		st.Roles = append(st.Roles, r)
	}
	if err := st.Check(); err != nil {
		return nil, err
	}
	return st, nil
}

func (e *protoEncoder) snapshot(kv *mvccpb.KeyValue) error {
	var err error
	e.buf, err = proto.MarshalOptions{Deterministic: true}.MarshalAppend(e.buf[:0], kv)
	if err != nil {
		return err
	}
	return e.write(e.buf)
}

func (e *protoEncoder) record(rec journal.Record) error {
	var err error
	if e.buf, err = journal.MarshalRecord(e.buf[:0], rec); err != nil {
		return err
	}
	return e.write(e.buf)
}

// Reader decodes an export, in either format. Read the header with Header,
// then the snapshot with Snapshot, then the records with Records, each
// once and in that order.
type Reader struct {
	br     *bufio.Reader
	format Format
	h      Header

	line    int64  // JSON lines: the number of the line last read
	pending []byte // JSON lines: a line read ahead
	msg     int64  // proto: the number of the message last read
	buf     []byte
	stage   int // 0: snapshot next, 1: records next, 2: done
}

// jsonMagic starts every JSON lines export.
var jsonMagic = []byte(`{"kind":"header"`)

// NewReader reads the header of the export in r and tells its format
// apart: a JSON lines export begins with {"kind":"header".
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 1<<20)}
	start, err := rd.br.Peek(len(jsonMagic))
	if err != nil && len(start) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrBadExport)
	}
	if bytes.Equal(start, jsonMagic) {
		rd.format = JSONL
		err = rd.jsonHeader()
	} else {
		rd.format = Proto
		err = rd.protoHeader()
	}
	if err != nil {
		return nil, err
	}
	return rd, nil
}

// Format is the export's format.
func (r *Reader) Format() Format { return r.format }

// Header is the export's header.
func (r *Reader) Header() Header { return r.h }

func (r *Reader) badLine(format string, a ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrBadExport, r.line, fmt.Sprintf(format, a...))
}

// readLine returns the next line without its "\n", or io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	if r.pending != nil {
		l := r.pending
		r.pending = nil
		return l, nil
	}
	l, err := r.br.ReadBytes('\n')
	if err == io.EOF && len(l) > 0 {
		err = nil // a last line without "\n"
	}
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("journaltool: read export: %w", err)
	}
	r.line++
	return bytes.TrimSuffix(l, []byte("\n")), nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields.
func decodeStrict(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value on the line")
	}
	return nil
}

// lineKind returns the "kind" of a JSON line.
func lineKind(line []byte) (string, error) {
	var k struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(line, &k); err != nil {
		return "", err
	}
	return k.Kind, nil
}

// decodeBytes reads a "<name>_b64" field and checks its "<name>" twin.
func decodeBytes(name string, txt *string, enc string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%s_b64: %v", name, err)
	}
	if txt != nil && *txt != string(b) {
		return nil, fmt.Errorf("%s %q disagrees with %s_b64", name, *txt, name)
	}
	return b, nil
}

func (j jsonKV) keyValue() (*mvccpb.KeyValue, error) {
	k, err := decodeBytes("key", j.Key, j.KeyB64)
	if err != nil {
		return nil, err
	}
	v, err := decodeBytes("value", j.Value, j.ValueB64)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		v = nil // as proto.Unmarshal leaves an empty value
	}
	return &mvccpb.KeyValue{Key: k, Value: v, CreateRevision: j.CreateRevision, ModRevision: j.ModRevision,
		Version: j.Version, Lease: j.Lease}, nil
}

func (r *Reader) jsonHeader() error {
	line, err := r.readLine()
	if err != nil {
		return fmt.Errorf("%w: no header: %v", ErrBadExport, err)
	}
	var jh jsonHeader
	if err := decodeStrict(line, &jh); err != nil {
		return r.badLine("header: %v", err)
	}
	if jh.Format != FormatName {
		return r.badLine("format %q, want %q", jh.Format, FormatName)
	}
	prefix, err := decodeBytes("prefix", jh.Prefix, jh.PrefixB64)
	if err != nil {
		return r.badLine("header: %v", err)
	}
	r.h = Header{ClusterID: jh.ClusterID, MemberID: jh.MemberID, SnapshotRev: jh.SnapshotRevision,
		CompactRev: jh.CompactRevision, LastRev: jh.LastRevision, SnapshotKeys: jh.SnapshotKeys}
	for _, l := range jh.Leases {
		r.h.Leases = append(r.h.Leases, journal.LeaseRecord{ID: l.ID, TTL: l.TTL})
	}
	if len(prefix) > 0 {
		r.h.Prefix = prefix
	}
	if ja := jh.Auth; ja != nil {
		var users, roles [][]byte
		for i, u := range ja.UsersB64 {
			b, err := base64.StdEncoding.DecodeString(u)
			if err != nil {
				return r.badLine("header: auth: user %d: %v", i+1, err)
			}
			users = append(users, b)
		}
		for i, ro := range ja.RolesB64 {
			b, err := base64.StdEncoding.DecodeString(ro)
			if err != nil {
				return r.badLine("header: auth: role %d: %v", i+1, err)
			}
			roles = append(roles, b)
		}
		if r.h.Auth, err = unmarshalAuth(ja.Enabled, ja.Revision, users, roles); err != nil {
			return r.badLine("header: auth: %v", err)
		}
	}
	return r.checkHeader()
}

func (r *Reader) checkHeader() error {
	h := r.h
	if h.SnapshotRev < 0 || h.SnapshotKeys < 0 || h.LastRev < h.SnapshotRev ||
		h.CompactRev < h.SnapshotRev || h.CompactRev > max(h.LastRev, 1) {
		return fmt.Errorf("%w: header: want 0 <= snapshot revision (%d) <= compact revision (%d) <= last revision (%d), snapshot keys %d",
			ErrBadExport, h.SnapshotRev, h.CompactRev, h.LastRev, h.SnapshotKeys)
	}
	return nil
}

func (r *Reader) protoHeader() error {
	msg, err := r.readMessage()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: not an export (neither JSON lines nor a protobuf header): %v", ErrBadExport, err)
	}
	var ph journalv1.ExportHeader
	if err := proto.Unmarshal(msg, &ph); err != nil || ph.Format != FormatName {
		return fmt.Errorf("%w: not an export (neither JSON lines nor a protobuf header with format %q)", ErrBadExport, FormatName)
	}
	r.h = Header{ClusterID: ph.ClusterId, MemberID: ph.MemberId, SnapshotRev: ph.SnapshotRevision,
		CompactRev: ph.CompactRevision, LastRev: ph.LastRevision, SnapshotKeys: ph.SnapshotKeys}
	for _, l := range ph.Leases {
		r.h.Leases = append(r.h.Leases, journal.LeaseRecord{ID: l.Id, TTL: l.Ttl})
	}
	if len(ph.Prefix) > 0 {
		r.h.Prefix = ph.Prefix
	}
	if pa := ph.Auth; pa != nil {
		if r.h.Auth, err = unmarshalAuth(pa.Enabled, pa.Revision, pa.Users, pa.Roles); err != nil {
			return fmt.Errorf("%w: header: auth: %v", ErrBadExport, err)
		}
	}
	return r.checkHeader()
}

// readMessage reads one length-delimited message; io.EOF only at a clean
// end (no byte of a next message).
func (r *Reader) readMessage() ([]byte, error) {
	n, err := binary.ReadUvarint(r.br)
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: message %d: length: %v", ErrBadExport, r.msg+1, err)
	}
	if n > maxMessage {
		return nil, fmt.Errorf("%w: message %d: length %d is too large", ErrBadExport, r.msg+1, n)
	}
	// Read in chunks, growing the buffer as the bytes come: a length that
	// the file does not hold fails without taking that much memory first.
	r.buf = r.buf[:0]
	for left := int(n); left > 0; {
		chunk := min(left, readChunk)
		start := len(r.buf)
		r.buf = slices.Grow(r.buf, chunk)[:start+chunk]
		if _, err := io.ReadFull(r.br, r.buf[start:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: message %d: %v", ErrBadExport, r.msg+1, err)
		}
		left -= chunk
	}
	r.msg++
	return r.buf, nil
}

// Snapshot yields the snapshot entries, checking that there are as many
// as the header says.
func (r *Reader) Snapshot() iter.Seq2[*mvccpb.KeyValue, error] {
	return func(yield func(*mvccpb.KeyValue, error) bool) {
		if r.stage != 0 {
			yield(nil, errors.New("journaltool: Reader.Snapshot called twice or after Records"))
			return
		}
		r.stage = 1
		var n int64
		for {
			kv, err := r.nextSnapshot(n)
			if err != nil {
				yield(nil, err)
				return
			}
			if kv == nil {
				break
			}
			n++
			if !yield(kv, nil) {
				return
			}
		}
		if n != r.h.SnapshotKeys {
			yield(nil, fmt.Errorf("%w: the snapshot holds %d entries, the header says %d", ErrBadExport, n, r.h.SnapshotKeys))
		}
	}
}

// nextSnapshot returns the next snapshot entry, or nil after the last.
func (r *Reader) nextSnapshot(n int64) (*mvccpb.KeyValue, error) {
	if r.format == Proto {
		if n == r.h.SnapshotKeys {
			return nil, nil
		}
		msg, err := r.readMessage()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: the file ends after %d of %d snapshot entries", ErrBadExport, n, r.h.SnapshotKeys)
		}
		if err != nil {
			return nil, err
		}
		kv := new(mvccpb.KeyValue)
		if err := proto.Unmarshal(msg, kv); err != nil {
			return nil, fmt.Errorf("%w: message %d: snapshot entry: %v", ErrBadExport, r.msg, err)
		}
		return kv, nil
	}
	line, err := r.readLine()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kind, err := lineKind(line)
	if err != nil {
		return nil, r.badLine("%v", err)
	}
	if kind != kindSnapshot {
		r.pending = line
		return nil, nil
	}
	var js jsonSnapshot
	if err := decodeStrict(line, &js); err != nil {
		return nil, r.badLine("%v", err)
	}
	kv, err := js.keyValue()
	if err != nil {
		return nil, r.badLine("%v", err)
	}
	return kv, nil
}

// Records yields the records in order. It does not check that revisions
// follow each other (Import does); it checks that JSON lines of one
// revision are together.
func (r *Reader) Records() iter.Seq2[journal.Record, error] {
	return func(yield func(journal.Record, error) bool) {
		if r.stage == 0 {
			for _, err := range r.Snapshot() {
				if err != nil {
					yield(journal.Record{}, err)
					return
				}
			}
		}
		if r.stage != 1 {
			yield(journal.Record{}, errors.New("journaltool: Reader.Records called twice"))
			return
		}
		r.stage = 2
		if r.format == Proto {
			r.protoRecords(yield)
		} else {
			r.jsonRecords(yield)
		}
	}
}

func (r *Reader) protoRecords(yield func(journal.Record, error) bool) {
	for {
		msg, err := r.readMessage()
		if err == io.EOF {
			return
		}
		if err != nil {
			yield(journal.Record{}, err)
			return
		}
		rec, err := journal.UnmarshalRecord(msg)
		if err != nil {
			yield(journal.Record{}, fmt.Errorf("%w: message %d: %v", ErrBadExport, r.msg, err))
			return
		}
		if !yield(rec, nil) {
			return
		}
	}
}

func (r *Reader) jsonRecords(yield func(journal.Record, error) bool) {
	var rec journal.Record
	flush := func() bool {
		if rec.Revision == 0 {
			return true
		}
		ok := yield(rec, nil)
		rec = journal.Record{}
		return ok
	}
	for {
		line, err := r.readLine()
		if err == io.EOF {
			flush()
			return
		}
		if err != nil {
			yield(journal.Record{}, err)
			return
		}
		kind, err := lineKind(line)
		if err != nil {
			yield(journal.Record{}, r.badLine("%v", err))
			return
		}
		var rev int64
		var ev *mvccpb.Event
		switch kind {
		case kindEvent:
			var je jsonEvent
			if err := decodeStrict(line, &je); err != nil {
				yield(journal.Record{}, r.badLine("%v", err))
				return
			}
			typ, ok := mvccpb.Event_EventType_value[je.Type]
			if !ok {
				yield(journal.Record{}, r.badLine("event type %q (want PUT or DELETE)", je.Type))
				return
			}
			kv, err := je.keyValue()
			if err != nil {
				yield(journal.Record{}, r.badLine("%v", err))
				return
			}
			rev, ev = je.Revision, &mvccpb.Event{Type: mvccpb.Event_EventType(typ), Kv: kv}
		case kindEmpty:
			var je jsonEmpty
			if err := decodeStrict(line, &je); err != nil {
				yield(journal.Record{}, r.badLine("%v", err))
				return
			}
			rev = je.Revision
		case kindSnapshot:
			yield(journal.Record{}, r.badLine("snapshot entry after the events"))
			return
		default:
			yield(journal.Record{}, r.badLine("unknown kind %q", kind))
			return
		}
		switch {
		case rev <= 0 || rev < rec.Revision:
			yield(journal.Record{}, r.badLine("revision %d after revision %d", rev, rec.Revision))
			return
		case rev == rec.Revision && (ev == nil || len(rec.Events) == 0):
			yield(journal.Record{}, r.badLine("revision %d both empty and with events", rev))
			return
		case rev != rec.Revision:
			if !flush() {
				return
			}
			rec.Revision = rev
		}
		if ev != nil {
			rec.Events = append(rec.Events, ev)
		}
	}
}
