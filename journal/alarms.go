package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/cockroachdb/pebble/v2"
)

// Alarms are kept under one key, "m/alarms" (see the layout in doc.go):
//
//	+-----------+------------------------------------------------------+
//	| CRC (4B)  | n × (member id (8B, big-endian) | alarm type (4B))   |
//	+-----------+------------------------------------------------------+
//
// with the CRC-32C (Castagnoli), big-endian, over the entries. The key is
// absent when no alarm was ever raised. Alarms are not revisions: etcd
// raises and clears them without a new revision, and they survive restarts.
var keyAlarms = []byte("m/alarms")

const alarmEntryLen = 8 + 4

// Alarm is one raised alarm: the member it is raised for and its type (an
// etcdserverpb.AlarmType, NOSPACE or CORRUPT).
type Alarm struct {
	MemberID uint64
	Type     int32
}

// SetAlarms replaces the durable alarms with alarms when the batch
// commits.
func (b *Batch) SetAlarms(alarms []Alarm) {
	v := make([]byte, crcLen, crcLen+len(alarms)*alarmEntryLen)
	for _, a := range alarms {
		v = binary.BigEndian.AppendUint64(v, a.MemberID)
		v = binary.BigEndian.AppendUint32(v, uint32(a.Type))
	}
	binary.BigEndian.PutUint32(v, crc32.Checksum(v[crcLen:], castagnoli))
	b.op(func() error {
		if err := b.pb.Set(keyAlarms, v, nil); err != nil {
			return fmt.Errorf("journal: set alarms: %w", err)
		}
		return nil
	})
}

// Alarms returns the durable alarms, in the order they were set. A damaged
// value is an error wrapping ErrCorrupt.
func (j *Journal) Alarms() ([]Alarm, error) {
	if err := j.life.enter(); err != nil {
		return nil, err
	}
	defer j.life.exit()
	v, closer, err := j.db.Get(keyAlarms)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, j.corrupt(readErr("read alarms", err))
	}
	defer closer.Close()
	alarms, err := decodeAlarms(v)
	return alarms, j.corrupt(err)
}

func decodeAlarms(v []byte) ([]Alarm, error) {
	if len(v) < crcLen || (len(v)-crcLen)%alarmEntryLen != 0 {
		return nil, fmt.Errorf("%w: alarms: value of %d bytes", ErrCorrupt, len(v))
	}
	if stored, computed := binary.BigEndian.Uint32(v), crc32.Checksum(v[crcLen:], castagnoli); stored != computed {
		return nil, fmt.Errorf("%w: alarms: checksum mismatch (stored %#08x, computed %#08x)", ErrCorrupt, stored, computed)
	}
	var out []Alarm
	for e := v[crcLen:]; len(e) > 0; e = e[alarmEntryLen:] {
		out = append(out, Alarm{MemberID: binary.BigEndian.Uint64(e), Type: int32(binary.BigEndian.Uint32(e[8:]))})
	}
	return out, nil
}
