package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Pebble's write-ahead logs and MANIFEST share one record format (package
// pebble/v2/record, whose constants are frozen): the file is a sequence of
// 32 KiB blocks; a block holds chunks, which never cross a block's end; a
// record is one full chunk or a first, middle... and last chunk. A chunk is
// a header and a payload, in one of three wire formats:
//
//	legacy      CRC (4) | length (2) | type (1)                              (7 bytes)
//	recyclable  CRC (4) | length (2) | type (1) | log (4)                    (11 bytes)
//	WAL sync    CRC (4) | length (2) | type (1) | log (4) | synced up to (8) (19 bytes)
//
// little-endian, type 1-4 (legacy full, first, middle, last), 5-8
// (recyclable) and 9-12 (WAL sync); the CRC is Pebble's masked CRC-32C of
// the header from the type on and the payload. "log" is the low 32 bits of
// the WAL's file number, and a chunk whose log is one more ends the log
// (the EOF trailer Pebble writes when it closes a WAL). "Synced up to" is
// the offset up to which the WAL was synced when the chunk was written.
// Bytes left at a block's end too few for a header are zero.
//
// Pebble's reader stops at the first chunk that does not read and, in the
// newest WAL, takes it for the end of the log unless a chunk in a *later*
// block says the log was synced past it: a damaged chunk in the last block
// that holds data loses everything after it without a word, and so does a
// damaged chunk in a WAL written without sync offsets (a store's first
// WAL). Worse, Pebble v2.1.7's writer counts in its sync offsets only the
// bytes of the block it was filling, not the blocks it flushed whole, so
// the offsets lag the truth (a lower bound: never past what was synced,
// often far behind). scanLog reads the same format byte by byte to tell a
// torn end from damage (see classify).

const (
	logBlock            = 32 << 10
	legacyHeaderLen     = 7
	recyclableHeaderLen = 11
	walSyncHeaderLen    = 19
	// sectorLen is the unit a disk writes whole, or not at all.
	sectorLen = 512
)

type chunkPos uint8

const (
	posInvalid chunkPos = iota
	posFull
	posFirst
	posMiddle
	posLast
)

// chunk is a chunk header as read at off.
type chunk struct {
	off       int64
	headerLen int
	length    int
	pos       chunkPos
	hasLog    bool
	log       uint32
	hasSynced bool
	synced    uint64
}

// end is the offset just past the chunk.
func (c chunk) end() int64 { return c.off + int64(c.headerLen+c.length) }

// readHeader parses the chunk header at off without checking the CRC. It
// fails if the bytes cannot be a header: a zero header, an unknown type,
// a header or payload that would cross the block's end.
func readHeader(data []byte, off int64) (chunk, string) {
	lim := min(int64(len(data)), (off/logBlock+1)*logBlock)
	short := cutByEOF
	if lim < int64(len(data)) {
		short = "a chunk header crosses the end of its block"
	}
	if lim-off < legacyHeaderLen {
		return chunk{}, short
	}
	h := data[off:]
	crc, length, typ := binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint16(h[4:]), h[6]
	c := chunk{off: off, length: int(length)}
	switch {
	case crc == 0 && length == 0 && typ == 0:
		return chunk{}, "zeroed header"
	case typ >= 1 && typ <= 4:
		c.headerLen, c.pos = legacyHeaderLen, chunkPos(typ)
	case typ >= 5 && typ <= 8:
		c.headerLen, c.pos, c.hasLog = recyclableHeaderLen, chunkPos(typ-4), true
	case typ >= 9 && typ <= 12:
		c.headerLen, c.pos, c.hasLog, c.hasSynced = walSyncHeaderLen, chunkPos(typ-8), true, true
	default:
		return chunk{}, fmt.Sprintf("unknown chunk type %d", typ)
	}
	if lim-off < int64(c.headerLen) {
		return chunk{}, short
	}
	if c.hasLog {
		c.log = binary.LittleEndian.Uint32(h[7:])
	}
	if c.hasSynced {
		c.synced = binary.LittleEndian.Uint64(h[11:])
	}
	switch {
	case c.end() > (off/logBlock+1)*logBlock:
		return chunk{}, fmt.Sprintf("chunk of %d bytes crosses the end of its block", c.length)
	case c.end() > lim:
		return c, cutByEOF
	}
	return c, ""
}

// endsInRecord is scanLog's complaint about a file that ends between the
// chunks of a record.
const endsInRecord = "the file ends inside a record"

// cutByEOF is readHeader's complaint about a chunk the file's end cuts
// short (the chunk it returns is whole but for its end).
const cutByEOF = "the file ends inside a chunk"

// crcOK checks the chunk's CRC.
func crcOK(data []byte, c chunk) bool {
	want := binary.LittleEndian.Uint32(data[c.off:])
	return pebbleCRC(data[c.off+6:c.end()]) == want
}

var pebbleCRCTable = crc32.MakeTable(crc32.Castagnoli)

// pebbleCRC is Pebble's masked CRC-32C (pebble/v2/internal/crc).
func pebbleCRC(b []byte) uint32 {
	c := crc32.Update(0, pebbleCRCTable, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// logKind says which rules a log's end follows.
type logKind uint8

const (
	// logNewestWAL: the WAL being written when the store stopped. It may end
	// anywhere after its last synced byte (a crash), in zeroes (the
	// preallocated tail) or its EOF trailer (a clean close).
	logNewestWAL logKind = iota
	// logOlderWAL: a WAL Pebble closed (synced, with its EOF trailer) before
	// the next one was created; it must end with the trailer.
	logOlderWAL
	// logManifest: the MANIFEST, one record per version edit, each synced
	// before the next is written. Its last edit may be torn by a crash.
	logManifest
)

// logScan is what scanLog found in one log file.
type logScan struct {
	// Records is the number of whole, valid records.
	Records int
	// End is the offset just past the last whole, valid record: where
	// replay stops.
	End int64
	// Trailer says the log ended with its EOF trailer (a closed WAL).
	Trailer bool
	// Stop is the offset of the first chunk that does not read (the end
	// of the file if every chunk reads), and Why says what was wrong.
	Stop int64
	Why  string
	// Torn says the log's end is a write a crash tore: the bytes at Stop
	// are zeroes, or hold a chunk with a sector of zeroes, and no later
	// chunk says the log was synced past Stop.
	Torn bool
	// Damage, when set, says why the end of the log cannot be explained by
	// a crash: data a crash does not touch is damaged, and the records
	// after Stop are lost to replay.
	Damage string
}

// scanLog reads a log file's chunks (data is the whole file) and finds
// where, and why, it ends. logNum is the WAL's file number (ignored for
// the MANIFEST).
func scanLog(data []byte, kind logKind, logNum uint64) logScan {
	want := uint32(logNum)
	var (
		s        logScan
		pos      int64
		recStart int64 = -1 // offset of the record being read, -1 if none
		n              = int64(len(data))
	)
	for {
		if pos >= n {
			s.Stop = n
			if recStart >= 0 {
				s.Stop, s.Why = recStart, endsInRecord
			}
			break
		}
		lim := min(n, (pos/logBlock+1)*logBlock)
		if blockPadding(data[pos:lim]) {
			pos = lim
			continue
		}
		c, why := readHeader(data, pos)
		if why == "" && c.hasLog && c.log != want && kind != logManifest {
			if c.log == want+1 && recStart < 0 {
				s.Trailer, s.Stop = true, pos // the EOF trailer
				break
			}
			why = fmt.Sprintf("chunk of log %d in log %d", c.log, want)
		}
		if why == "" && !crcOK(data, c) {
			why = "checksum mismatch"
		}
		if why == "" {
			switch {
			case recStart >= 0 && (c.pos == posFull || c.pos == posFirst):
				why = "a record starts before the previous one ended"
			case recStart < 0 && (c.pos == posMiddle || c.pos == posLast):
				why = "a record's continuation without its start"
			}
		}
		if why != "" {
			s.Stop, s.Why = pos, why
			break
		}
		switch c.pos {
		case posFull:
			s.Records++
			s.End = c.end()
		case posFirst:
			recStart = pos
		case posLast:
			s.Records++
			s.End = c.end()
			recStart = -1
		}
		pos = c.end()
	}
	if s.Why != "" {
		s.classify(data, kind, want)
	}
	return s
}

// classify decides whether a log that stops at s.Stop, before its end,
// was cut by a crash or damaged. It is damage when
//
//   - a valid chunk after Stop says the WAL was synced past Stop (Pebble's
//     own test, but byte by byte, so that chunks in the same block count);
//   - any valid chunk follows Stop in the MANIFEST (each edit is synced
//     before the next is written);
//   - the log is an older WAL, which Pebble closed and synced;
//   - or the bad chunk has a header that is not zeroes and none of its
//     sector-aligned pieces reads as zeroes: a torn write leaves the
//     sectors it did not reach as they were, and a WAL file's unwritten
//     bytes are zeroes (walFS neither recycles files nor leaves their
//     tails unallocated). This is etcd's test for a torn WAL entry.
//
// The last test is skipped for a WAL whose tail holds chunks of an older
// log (a file Pebble recycled before walFS stopped it), whose unwritten
// bytes are not zeroes.
func (s *logScan) classify(data []byte, kind logKind, want uint32) {
	if kind == logOlderWAL {
		s.Damage = fmt.Sprintf("damaged chunk at offset %d (%s) in a write-ahead log that was closed and synced", s.Stop, s.Why)
		return
	}
	recycled := false
	n := int64(len(data))
	for p := s.Stop + 1; p+legacyHeaderLen <= n; p++ {
		if p%logBlock == 0 && allZero(data[p:min(n, p+logBlock)]) {
			p += logBlock - 1
			continue
		}
		typ := data[p+6]
		if typ == 0 || typ > 12 || (kind != logManifest && typ < 5) || (kind == logManifest && typ > 4) {
			continue
		}
		c, why := readHeader(data, p)
		if why != "" || !crcOK(data, c) {
			continue
		}
		if kind == logManifest {
			s.Damage = fmt.Sprintf("damaged edit at offset %d (%s), and a valid edit follows at offset %d", s.Stop, s.Why, p)
			return
		}
		if c.log != want {
			if c.log < want {
				recycled = true
			}
			continue
		}
		if c.hasSynced && c.synced > uint64(s.Stop) {
			s.Damage = fmt.Sprintf("damaged chunk at offset %d (%s), in the part of the log synced before the chunk at offset %d was written (synced up to %d)",
				s.Stop, s.Why, p, c.synced)
			return
		}
	}
	if recycled {
		s.Torn = true
		return
	}
	// A file that ends inside a record where a sector ends: the sectors
	// after it were never written (a file that grows gets its new size as
	// its pages reach the disk).
	if (s.Why == cutByEOF || s.Why == endsInRecord) && n%sectorLen == 0 {
		s.Torn = true
		return
	}
	// The span of the bad chunk: its header and payload if the header
	// reads, else as much as a header takes.
	end := min(n, (s.Stop/logBlock+1)*logBlock, s.Stop+walSyncHeaderLen)
	if c, why := readHeader(data, s.Stop); why == "" {
		end = c.end()
	}
	if hasZeroSector(data, s.Stop, end) {
		s.Torn = true
		return
	}
	s.Damage = fmt.Sprintf("damaged chunk at offset %d (%s), which a crash cannot leave: none of its sectors reads as zeroes", s.Stop, s.Why)
}

// blockPadding reports whether rest, the rest of a block, is the padding
// a writer leaves where no header fits, as Pebble's reader takes it: fewer
// bytes than a legacy header; a zero header with no room for a recyclable
// one; zeroes with no room for a WAL sync header.
func blockPadding(rest []byte) bool {
	switch {
	case len(rest) < legacyHeaderLen:
		return true
	case !allZero(rest[:legacyHeaderLen]):
		return false
	case len(rest) < recyclableHeaderLen:
		return true
	}
	return len(rest) < walSyncHeaderLen && allZero(rest)
}

// hasZeroSector reports whether data[from:to], cut at the disk's sector
// boundaries, has a piece that is all zeroes.
func hasZeroSector(data []byte, from, to int64) bool {
	for p := from; p < to; {
		q := min(to, (p/sectorLen+1)*sectorLen)
		if allZero(data[p:q]) {
			return true
		}
		p = q
	}
	return false
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
