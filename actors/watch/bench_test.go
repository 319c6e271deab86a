package watch

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// countSink counts the events it is sent and signals every n of them.
type countSink struct {
	n, seen int
	done    chan struct{}
}

func (s *countSink) Send(r *pb.WatchResponse) error {
	s.seen += len(r.Events)
	if s.seen == s.n {
		s.seen = 0
		s.done <- struct{}{}
	}
	return nil
}

// BenchmarkFanOut is etcd's watch-latency workload inside the hub: one put
// on a key watched by 100 watchers over 10 streams, from the commit reaching
// the hub until every stream has sent its responses.
func BenchmarkFanOut(b *testing.B) {
	for _, shape := range []struct{ streams, perStream int }{{10, 10}, {100, 100}} {
		b.Run(fmt.Sprintf("%dx%d", shape.streams, shape.perStream), func(b *testing.B) {
			e := newEnv(b, 0, HubOptions{})
			sinks := make([]*countSink, shape.streams)
			for i := range sinks {
				sinks[i] = &countSink{n: shape.perStream, done: make(chan struct{}, 1)}
				st := NewStream(StreamOptions{Hub: e.hub, HubRev: e.h.Rev, Root: e.sys.Root, Sink: sinks[i], Rev: func() int64 { return e.rev }})
				go st.Run()
				defer st.Close()
				for range shape.perStream {
					st.Handle(create("key", "", 0))
				}
			}
			// The created responses carry no events; wait until every
			// watcher is registered by seeing one put reach all of them.
			e.commit("key=v")
			for _, s := range sinks {
				<-s.done
			}
			b.ResetTimer()
			for range b.N {
				e.commit("key=v")
				for _, s := range sinks {
					<-s.done
				}
			}
		})
	}
}
