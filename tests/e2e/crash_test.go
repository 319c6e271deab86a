package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"revd/tests/testutil"
)

const (
	crashWriters   = 16
	crashRounds    = 5 // REVD_CRASH_ROUNDS=N runs N (the long run: 200)
	acksPerRound   = 200
	roundDeadline  = 90 * time.Second // a round with no such progress fails
	crashPutTimout = 3 * time.Second
	crashPrefix    = "crash/"
)

type ack struct {
	value string
	rev   int64 // header revision of the acknowledged Put = the key's mod_revision
}

// crashLog records what the writers attempted and what the server acknowledged.
type crashLog struct {
	mu        sync.Mutex
	attempted map[string]string // every key ever sent, with its value
	acked     map[string]ack
	progress  chan struct{}
}

func (l *crashLog) snapshot() (map[string]ack, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[string]ack, len(l.acked))
	for k, v := range l.acked {
		m[k] = v
	}
	return m, len(l.acked)
}

func (l *crashLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// TestCrashRecovery has 16 clientv3 writers put unique keys while the target
// is SIGKILLed at random points and restarted 5 times (REVD_CRASH_ROUNDS
// sets how many). After every restart each acknowledged put must be there
// with its value and mod revision, nothing that was never written may
// appear, and the store revision never goes back.
func TestCrashRecovery(t *testing.T) {
	kind := testutil.TargetKind(t, TargetEnv)
	p := testutil.Start(t, kind, testutil.Options{})
	raw := p.Dial(t)

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{p.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	log := &crashLog{attempted: map[string]string{}, acked: map[string]ack{}, progress: make(chan struct{}, 1)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("%sw%02d/%07d", crashPrefix, w, seq)
				val := fmt.Sprintf("v-%d-%d-%s", w, seq, strings.Repeat("x", seq%50))
				log.mu.Lock()
				log.attempted[key] = val
				log.mu.Unlock()
				ctx, cancel := context.WithTimeout(context.Background(), crashPutTimout)
				resp, err := cli.Put(ctx, key, val)
				cancel()
				if err != nil {
					continue // unknown outcome: the key may or may not exist
				}
				log.mu.Lock()
				log.acked[key] = ack{value: val, rev: resp.Header.Revision}
				log.mu.Unlock()
				select {
				case log.progress <- struct{}{}:
				default:
				}
			}
		}()
	}
	stopWriters := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopWriters()

	var lastRev int64
	rounds := crashRounds
	if s := os.Getenv("REVD_CRASH_ROUNDS"); s != "" {
		if rounds, err = strconv.Atoi(s); err != nil || rounds <= 0 {
			t.Fatalf("REVD_CRASH_ROUNDS=%q: want a positive number", s)
		}
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
	for round := 1; round <= rounds; round++ {
		// A random cut: 1 to 2*acksPerRound more acknowledged puts, with
		// 16 writers' puts in flight when the kill comes.
		want := log.count() + 1 + rng.IntN(2*acksPerRound)
		deadline := time.NewTimer(roundDeadline)
		for log.count() < want {
			select {
			case <-log.progress:
			case <-deadline.C:
				t.Fatalf("round %d: only %d of %d acknowledged puts within %v", round, log.count(), want, roundDeadline)
			}
		}
		deadline.Stop()

		p.Kill()
		acked, n := log.snapshot() // everything acknowledged before the crash
		p.Restart(t)
		lastRev = verifyCrash(t, fmt.Sprintf("after crash %d", round), raw, log, acked, lastRev)
		t.Logf("round %d: %d acknowledged puts verified, store revision %d", round, n, lastRev)
	}

	stopWriters()
	acked, n := log.snapshot()
	lastRev = verifyCrash(t, "at the end", raw, log, acked, lastRev)
	t.Logf("end: %d acknowledged puts of %d attempted, store revision %d", n, len(log.attempted), lastRev)
}

// verifyCrash reads the whole crash/ prefix and checks it against the
// acknowledged puts. It returns the store revision.
func verifyCrash(t *testing.T, when string, raw *testutil.Clients, log *crashLog, acked map[string]ack, lastRev int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := raw.KV.Range(ctx, &pb.RangeRequest{Key: []byte(crashPrefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(crashPrefix))})
	if err != nil {
		t.Fatalf("%s: range: %v", when, err)
	}
	rev := resp.Header.Revision
	if rev < lastRev {
		t.Fatalf("%s: store revision went back from %d to %d", when, lastRev, rev)
	}
	got := make(map[string]*struct {
		value string
		mod   int64
	}, len(resp.Kvs))
	log.mu.Lock()
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		v, ok := log.attempted[k]
		if !ok || v != string(kv.Value) {
			log.mu.Unlock()
			t.Fatalf("%s: key %q = %q was never written (attempted value %q, %v)", when, k, kv.Value, v, ok)
		}
		got[k] = &struct {
			value string
			mod   int64
		}{string(kv.Value), kv.ModRevision}
	}
	log.mu.Unlock()
	var maxAck int64
	missing := 0
	for k, a := range acked {
		maxAck = max(maxAck, a.rev)
		g, ok := got[k]
		switch {
		case !ok:
			missing++
			if missing <= 10 {
				t.Errorf("%s: acknowledged put %q (revision %d) is lost", when, k, a.rev)
			}
		case g.value != a.value || g.mod != a.rev:
			t.Errorf("%s: %q = %q at mod revision %d, acknowledged %q at revision %d", when, k, g.value, g.mod, a.value, a.rev)
		}
	}
	if missing > 0 {
		t.Errorf("%s: %d acknowledged puts lost in all", when, missing)
	}
	if rev < maxAck {
		t.Errorf("%s: store revision %d is below an acknowledged revision %d", when, rev, maxAck)
	}
	if t.Failed() {
		t.FailNow()
	}
	return rev
}
