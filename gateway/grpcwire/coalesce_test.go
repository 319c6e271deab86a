package grpcwire

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"golang.org/x/net/http2"
)

// dataFrames parses framed bytes into the DATA frames' (stream, payload)
// pairs, skipping WINDOW_UPDATE frames and failing on anything else.
func dataFrames(t *testing.T, b []byte) (ids []uint32, payloads []string) {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return ids, payloads
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*http2.WindowUpdateFrame); ok {
			continue
		}
		df, ok := f.(*http2.DataFrame)
		if !ok {
			t.Fatalf("unexpected frame %v", f)
		}
		ids = append(ids, df.StreamID)
		payloads = append(payloads, string(df.Data()))
	}
}

func TestBackToBackDataOfAStreamShareAFrame(t *testing.T) {
	c := newConn(&Server{}, nil)
	c.peerFrame = 8
	c.appendDataLocked(1, []byte("abc"))
	c.appendDataLocked(1, []byte("de")) // grows the frame: "abcde"
	c.appendDataLocked(3, []byte("x"))  // another stream: a frame of its own
	c.appendDataLocked(1, []byte("f"))  // stream 1's frame is no longer last
	c.appendDataLocked(1, []byte("ghijklm"))
	c.appendDataLocked(1, []byte("no")) // 7+2 > 8 bytes: a new frame
	c.fw.WriteWindowUpdate(0, 10)       // any other frame ends the run
	c.appendDataLocked(1, []byte("p"))

	ids, payloads := dataFrames(t, c.out)
	wantIDs := []uint32{1, 3, 1, 1, 1}
	wantPayloads := []string{"abcde", "x", "fghijklm", "no", "p"}
	if !slices.Equal(ids, wantIDs) || !slices.Equal(payloads, wantPayloads) {
		t.Errorf("frames %v %q, want %v %q", ids, payloads, wantIDs, wantPayloads)
	}

	// Once the writer takes the bytes, nothing is extended in place.
	c.out, c.lastData = c.out[:0], -1
	c.appendDataLocked(1, []byte("q"))
	c.appendDataLocked(1, []byte("r"))
	if ids, payloads := dataFrames(t, c.out); len(ids) != 1 || payloads[0] != "qr" {
		t.Errorf("after a take: %v %q", ids, payloads)
	}
}
