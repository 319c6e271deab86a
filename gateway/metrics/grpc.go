package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"revd/gateway/grpcstats"
)

// The gRPC server's counters, as go-grpc-prometheus names and describes
// them for etcd: every registered method, every code, from zero.
var (
	grpcStarted = prometheus.NewDesc("grpc_server_started_total", "Total number of RPCs started on the server.",
		[]string{"grpc_method", "grpc_service", "grpc_type"}, nil)
	grpcHandled = prometheus.NewDesc("grpc_server_handled_total", "Total number of RPCs completed on the server, regardless of success or failure.",
		[]string{"grpc_code", "grpc_method", "grpc_service", "grpc_type"}, nil)
	grpcReceived = prometheus.NewDesc("grpc_server_msg_received_total", "Total number of RPC stream messages received on the server.",
		[]string{"grpc_method", "grpc_service", "grpc_type"}, nil)
	grpcSent = prometheus.NewDesc("grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server.",
		[]string{"grpc_method", "grpc_service", "grpc_type"}, nil)
)

// grpcCollector reports a grpcstats.Stats.
type grpcCollector struct{ s *grpcstats.Stats }

func (g grpcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{grpcStarted, grpcHandled, grpcReceived, grpcSent} {
		ch <- d
	}
}

func (g grpcCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range g.s.Methods() {
		c := m.Counts()
		for _, f := range []struct {
			d *prometheus.Desc
			v uint64
		}{{grpcStarted, c.Started}, {grpcReceived, c.Received}, {grpcSent, c.Sent}} {
			ch <- prometheus.MustNewConstMetric(f.d, prometheus.CounterValue, float64(f.v), m.Name, m.Service, m.Type)
		}
		for code, n := range c.Handled {
			ch <- prometheus.MustNewConstMetric(grpcHandled, prometheus.CounterValue, float64(n),
				codes.Code(code).String(), m.Name, m.Service, m.Type)
		}
	}
}
