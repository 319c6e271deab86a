package hostile

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"golang.org/x/net/http2"

	"revd/internal/testutil/h2raw"
	"revd/tests/testutil"
)

const (
	methodRange = "/etcdserverpb.KV/Range"
	methodPut   = "/etcdserverpb.KV/Put"
	methodWatch = "/etcdserverpb.Watch/Watch"
)

// connLoop runs probe on a fresh connection to p, again each time the
// server ends one, until stop closes; conns such loops run at once.
func connLoop(p *testutil.Proc, conns int, stop <-chan struct{}, settings []http2.Setting, probe func(c *h2raw.Conn) error) {
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped(stop) {
				c, err := h2raw.DialConn(p.Endpoint, settings...)
				if err != nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				go func() {
					<-stop
					c.Close()
				}()
				_ = probe(c)
				c.Close()
			}
		}()
	}
	wg.Wait()
}

// TestFlowControlViolation: a stream sends DATA far past its flow-control
// window (a Put whose message claims 1 MiB, followed by 64 MiB), on four
// connections, each opened again when the server ends it.
func TestFlowControlViolation(t *testing.T) {
	run(t, probe{
		budgetMiB: 64,
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			chunk := make([]byte, 1<<20)
			connLoop(p, 4, stop, nil, func(c *h2raw.Conn) error {
				c.Discard()
				for id := uint32(1); !stopped(stop); id += 2 {
					if err := c.Open(id, methodPut); err != nil {
						return err
					}
					if err := c.Data(id, false, []byte{0, 0, 0x10, 0, 0}); err != nil {
						return err
					}
					for range 64 {
						if err := c.Data(id, false, chunk); err != nil {
							return err
						}
					}
				}
				return nil
			})
		},
	})
}

// rapidReset opens calls reading a key of size bytes and resets each at
// once (CVE-2023-44487), on two connections.
func rapidReset(size int, args ...string) probe {
	return probe{
		args:  args,
		setup: func(t *testing.T, p *testutil.Proc) { putValue(t, p, "big", size) },
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			req := h2raw.Message(&pb.RangeRequest{Key: []byte("big")})
			connLoop(p, 2, stop, nil, func(c *h2raw.Conn) error {
				c.Discard()
				for id := uint32(1); !stopped(stop); id += 2 {
					if err := c.Open(id, methodRange); err != nil {
						return err
					}
					if err := c.Data(id, true, req); err != nil {
						return err
					}
					if err := c.Reset(id); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// TestRapidReset: rapid reset of ranges returning 64 KiB.
func TestRapidReset(t *testing.T) {
	pr := rapidReset(64 << 10)
	pr.budgetMiB = 64
	run(t, pr)
}

// TestRapidResetLargeValues: rapid reset of ranges returning 1 MiB, with
// --max-concurrent-streams=100.
func TestRapidResetLargeValues(t *testing.T) {
	pr := rapidReset(1<<20, "--max-concurrent-streams=100")
	pr.budgetMiB = 64
	run(t, pr)
}

// TestOversizeFrames: on each of 30 connections, a Put whose DATA frame
// announces and sends 16 MiB, a thousand times the 16 KiB frame size
// limit; the connections stay open.
func TestOversizeFrames(t *testing.T) {
	run(t, probe{
		budgetMiB: 48,
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			payload := make([]byte, 16<<20)
			var wg sync.WaitGroup
			for range 30 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := h2raw.DialConn(p.Endpoint)
					if err != nil {
						return
					}
					defer c.Close()
					go func() {
						<-stop
						c.Close()
					}()
					if c.Open(1, methodPut) == nil {
						_ = c.RawFrame(http2.FrameData, 0, 1, len(payload), payload)
					}
					<-stop
				}()
			}
			wg.Wait()
		},
	})
}

// TestContinuationFlood: the CONTINUATION flood (2024): a call whose
// header block never ends, CONTINUATION frame after CONTINUATION frame of
// 16 KiB of header fields, on four connections, each opened again when the
// server ends it. A server that reads and drops the headers past its
// limit without ending the connection spends its CPU on the flood for as
// long as the client likes; each connection must be cut.
func TestContinuationFlood(t *testing.T) {
	run(t, probe{
		budgetMiB: 48,
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			frag := h2raw.HeaderFields(16 << 10)
			var mu sync.Mutex
			var cut int
			var sentToCut int64
			connLoop(p, 4, stop, nil, func(c *h2raw.Conn) error {
				ended := c.Discard()
				if err := c.OpenUnended(1, methodRange); err != nil {
					return err
				}
				var sent int64
				for !stopped(stop) {
					err := c.Continue(1, false, frag)
					if err == nil {
						sent += int64(len(frag))
						select {
						case <-ended:
						default:
							continue
						}
					}
					// The server ended the connection (a write fails once
					// it is closed; the reader sees it first, or soon).
					select {
					case <-ended:
						mu.Lock()
						cut++
						sentToCut += sent
						mu.Unlock()
					case <-stop:
					}
					return err
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if cut < 4 {
				t.Errorf("the server ended %d flooding connections, want at least one per connection (4)", cut)
				return
			}
			t.Logf("%d flooding connections ended by the server, after %.1f MiB of header block each on average (some of it still in the sockets' buffers)",
				cut, float64(sentToCut)/float64(cut)/(1<<20))
		},
	})
}

// TestControlFrameFlood: PING and SETTINGS frames in a loop, each of which
// the server must answer, from clients that never read the answers, on
// four connections, each opened again when the server ends it: the answers
// the server queues for a client must stay bounded.
func TestControlFrameFlood(t *testing.T) {
	run(t, probe{
		budgetMiB: 48,
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			var mu sync.Mutex
			var ended, frames int
			connLoop(p, 4, stop, nil, func(c *h2raw.Conn) error {
				n := 0
				defer func() {
					mu.Lock()
					frames += n
					mu.Unlock()
				}()
				for !stopped(stop) {
					err := c.Ping()
					if err == nil {
						err = c.Settings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
					}
					if err != nil {
						if !stopped(stop) {
							mu.Lock()
							ended++
							mu.Unlock()
						}
						return err
					}
					n += 2
				}
				return nil
			})
			t.Logf("%d control frames sent; the server ended %d connections", frames, ended)
		},
	})
}

// TestHugeLengthPrefix: calls (Put and Watch) whose message announces
// 0xFFFFFFFF bytes, each followed by 1 MiB of it, in a loop on four
// connections.
func TestHugeLengthPrefix(t *testing.T) {
	run(t, probe{
		budgetMiB: 96,
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			body := append([]byte{0, 0xff, 0xff, 0xff, 0xff}, make([]byte, 1<<20)...)
			connLoop(p, 4, stop, nil, func(c *h2raw.Conn) error {
				c.Discard()
				for id := uint32(1); !stopped(stop); id += 2 {
					method := methodPut
					if id%4 == 3 {
						method = methodWatch
					}
					if err := c.Open(id, method); err != nil {
						return err
					}
					if err := c.Data(id, false, body); err != nil {
						return err
					}
				}
				return nil
			})
		},
	})
}

// TestNeverReadingClient: clients that grant the server the largest
// windows HTTP/2 allows, then call ranges of a 64 KiB value as fast as
// they can and never read a byte, on four connections.
func TestNeverReadingClient(t *testing.T) {
	pr := probeNeverReading()
	pr.budgetMiB = 256
	run(t, pr)
}

func probeNeverReading() probe {
	return probe{
		setup: func(t *testing.T, p *testutil.Proc) { putValue(t, p, "big", 64<<10) },
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			req := h2raw.Message(&pb.RangeRequest{Key: []byte("big")})
			settings := []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}}
			connLoop(p, 4, stop, settings, func(c *h2raw.Conn) error {
				if err := c.WindowUpdate(0, 1<<31-1-65535); err != nil {
					return err
				}
				for id := uint32(1); !stopped(stop); id += 2 {
					if err := c.Open(id, methodRange); err != nil {
						return err
					}
					if err := c.Data(id, true, req); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// TestIdleConnections: 5,000 TCP connections that never send a byte; then
// fifteen new gRPC clients and an HTTP client each get their answer.
func TestIdleConnections(t *testing.T) {
	run(t, probe{
		budgetMiB: 64,
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			var idle []net.Conn
			defer func() {
				for _, c := range idle {
					c.Close()
				}
			}()
			for range 5000 {
				c, err := net.Dial("tcp", p.Endpoint)
				if err != nil {
					t.Errorf("idle connection %d: %v", len(idle), err)
					break
				}
				idle = append(idle, c)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			failed := 0
			for i := range 15 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cli := testutil.Dial(t, p.Endpoint)
					ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
					defer cancel()
					if _, err := cli.KV.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "new-%d", i), Value: []byte("v")}); err != nil {
						mu.Lock()
						failed++
						mu.Unlock()
						t.Errorf("new client %d, after 5,000 idle connections: %v", i, err)
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				hc := &http.Client{Timeout: callTimeout}
				resp, err := hc.Get(p.ClientURL + "/version")
				if err != nil {
					t.Errorf("HTTP client, after 5,000 idle connections: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("HTTP client, after 5,000 idle connections: %s", resp.Status)
				}
			}()
			wg.Wait()
			t.Logf("%d idle connections; %d of 15 new gRPC clients failed", len(idle), failed)
			<-stop
		},
	})
}

// stalledWatchers opens 100 watch streams on prefix "w/", each on a
// connection of its own that never reads after the request, while ten
// writers put values of size bytes under it, each to a key of its own (the
// data stays ten values: what grows is the history, which the journal
// holds, and what the watchers are owed).
func stalledWatchers(size int) probe {
	return probe{
		attack: func(t *testing.T, p *testutil.Proc, stop <-chan struct{}) {
			var wg sync.WaitGroup
			for range 100 {
				c, err := h2raw.DialConn(p.Endpoint)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				req := h2raw.Message(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{
					CreateRequest: &pb.WatchCreateRequest{Key: []byte("w/"), RangeEnd: []byte("w0")}}})
				if err := c.Open(1, methodWatch); err != nil {
					t.Error(err)
					return
				}
				if err := c.Data(1, false, req); err != nil {
					t.Error(err)
					return
				}
			}
			val := bytes.Repeat([]byte("x"), size)
			for w := range 10 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cli := testutil.Dial(t, p.Endpoint)
					for !stopped(stop) {
						ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
						_, err := cli.KV.Put(ctx, &pb.PutRequest{Key: fmt.Appendf(nil, "w/%d", w), Value: val})
						cancel()
						if err != nil && !stopped(stop) {
							t.Errorf("writer %d: %v", w, err)
							return
						}
					}
				}()
			}
			wg.Wait()
		},
	}
}

// TestStalledWatchers: 100 stalled watchers while 10 KiB values are put.
func TestStalledWatchers(t *testing.T) {
	pr := stalledWatchers(10 << 10)
	pr.budgetMiB = 200
	run(t, pr)
}

// TestStalledWatchersLargeValues: the same with 1 MiB values.
func TestStalledWatchersLargeValues(t *testing.T) {
	pr := stalledWatchers(1 << 20)
	pr.budgetMiB = 1024
	run(t, pr)
}
