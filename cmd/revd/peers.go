package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// errRemoved ends revd when its member was removed from the cluster.
var errRemoved = errors.New("the member has been permanently removed from the cluster")

// servePeers serves the peer URLs (raft's transport, see server.PeerHandler)
// on the bound peer listeners, in TLS with the peer TLS flags on https://
// ones (etcd's listener: client certificates checked against the CRL and,
// unless told otherwise, their SANs against the peer's address). It
// returns a function that stops them.
func servePeers(lns []net.Listener, cc *clusterConfig, h http.Handler, log *slog.Logger) (func(), error) {
	var servers []*http.Server
	stop := func() {
		for _, hs := range servers {
			hs.Close()
		}
	}
	for i, ln := range lns {
		if cc.listenPeer[i].Scheme == "https" {
			var err error
			if ln, err = transport.NewTLSListener(ln, &cc.PeerTLS); err != nil {
				stop()
				return nil, err
			}
		}
		hs := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.With("component", "peer-http").Handler(), slog.LevelDebug),
		}
		servers = append(servers, hs)
		go func() { _ = hs.Serve(ln) }()
	}
	return stop, nil
}
