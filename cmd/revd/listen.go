package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// clientSchemes are the client URLs' schemes, as etcd's: unix:// and
// unixs:// listen on a unix socket, whose path is the URL's host and path
// (unix:///run/revd.sock, or unix://localhost:2379 for a file of that name
// in the working directory).
var clientSchemes = []string{"http", "https", "unix", "unixs"}

// secureURL reports whether u is served over TLS.
func secureURL(u *url.URL) bool { return u.Scheme == "https" || u.Scheme == "unixs" }

// unixURL reports whether u is a unix socket.
func unixURL(u *url.URL) bool { return u.Scheme == "unix" || u.Scheme == "unixs" }

// bindAddr is where u listens: host:port, or a unix socket's path.
func bindAddr(u *url.URL) string {
	if unixURL(u) {
		return u.Host + u.Path
	}
	return u.Host
}

// ports are the bound listeners: bound.client[i] serves cfg.clientURLs[i],
// bound.clientHTTP[i] cfg.clientHTTPURLs[i], bound.metrics[i]
// cfg.metricsURLs[i].
type ports struct {
	client, clientHTTP, metrics, peer []net.Listener
}

// bind listens on every client and metrics URL; on error it closes what it
// bound.
func bind(cfg *config) (*ports, error) {
	p := &ports{}
	lc := net.ListenConfig{Control: socketControl(cfg.reuseAddress, cfg.reusePort)}
	var peerURLs []*url.URL
	if cfg.cluster != nil {
		peerURLs = cfg.cluster.listenPeer
	}
	for _, set := range []struct {
		urls []*url.URL
		lns  *[]net.Listener
	}{{cfg.clientURLs, &p.client}, {cfg.clientHTTPURLs, &p.clientHTTP}, {cfg.metricsURLs, &p.metrics},
		{peerURLs, &p.peer}} {
		for _, u := range set.urls {
			var ln net.Listener
			var err error
			if unixURL(u) {
				// As etcd: a socket file left by an earlier run is
				// replaced, and the file is removed when it closes.
				ln, err = transport.NewUnixListener(bindAddr(u))
			} else {
				ln, err = lc.Listen(context.Background(), "tcp", u.Host)
			}
			if err != nil {
				p.close()
				return nil, fmt.Errorf("listening on %s: %w", u, err)
			}
			*set.lns = append(*set.lns, ln)
		}
	}
	return p, nil
}

func (p *ports) close() {
	for _, ln := range slices.Concat(p.client, p.clientHTTP, p.metrics, p.peer) {
		ln.Close()
	}
}

// tlsListener marks the listeners secure wrapped.
type tlsListener struct{ net.Listener }

// secure wraps the listeners of the https:// URLs in TLS, all with one
// configuration built from the TLS flags. As etcd does, it warns when
// certificate flags are given but a client URL is http://.
func (p *ports) secure(cfg *config, log *slog.Logger) error {
	var tc *tls.Config
	wrap := func(u *url.URL, ln *net.Listener, httpOnly bool) error {
		if tc == nil {
			if cfg.tls.AutoTLS && cfg.tls.CertFile == "" && cfg.tls.KeyFile == "" &&
				(cfg.tls.ClientCertAuth || cfg.tls.TrustedCAFile != "" || cfg.tls.CRLFile != "" || len(cfg.tls.AllowedHostnames) > 0) {
				log.Warn("--auto-tls serves a self-signed certificate and, as etcd, ignores the client certificate flags")
			}
			var err error
			if tc, err = cfg.tls.Config(); err != nil {
				return fmt.Errorf("TLS for %s: %w", u, err)
			}
		}
		c := tc
		if httpOnly {
			// No gRPC behind it: HTTP/2 for the clients that offer it, as
			// etcd's HTTP-only listeners (tc sends those that also offer
			// HTTP/1.1 to the HTTP side of a shared port).
			c = tc.Clone()
			c.NextProtos, c.GetConfigForClient = []string{"h2", "http/1.1"}, nil
		}
		*ln = tlsListener{tls.NewListener(*ln, c)}
		return nil
	}
	clients := func(urls []*url.URL, lns []net.Listener, httpOnly bool) error {
		for i, u := range urls {
			if !secureURL(u) {
				if cfg.tls.CertFile != "" || cfg.tls.KeyFile != "" {
					log.Warn("scheme is http while key and cert files are present; ignoring key and cert files", "client-url", u.String())
				}
				if cfg.tls.ClientCertAuth {
					log.Warn("scheme is http while --client-cert-auth is enabled; ignoring client cert auth for this URL", "client-url", u.String())
				}
				continue
			}
			if err := wrap(u, &lns[i], httpOnly); err != nil {
				return err
			}
		}
		return nil
	}
	if err := clients(cfg.clientURLs, p.client, false); err != nil {
		return err
	}
	if err := clients(cfg.clientHTTPURLs, p.clientHTTP, true); err != nil {
		return err
	}
	for i, u := range cfg.metricsURLs {
		if secureURL(u) {
			if err := wrap(u, &p.metrics[i], true); err != nil {
				return err
			}
		}
	}
	return nil
}

// serveMetrics serves h (/metrics and the health endpoints) on the metrics
// listeners, HTTP/1.1 and, over TLS, HTTP/2; it returns the function that
// stops it.
func serveMetrics(p *ports, h http.Handler, log *slog.Logger) (stop func()) {
	if len(p.metrics) == 0 {
		return func() {}
	}
	ms := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.With("component", "metrics").Handler(), slog.LevelDebug),
	}
	serveHTTP(ms, p.metrics)
	return func() { ms.Close() }
}

// serveHTTP serves hs on lns (listeners of their own, not Split's sides):
// HTTP/1.1 and, over TLS, HTTP/2.
func serveHTTP(hs *http.Server, lns []net.Listener) {
	for _, ln := range lns {
		if tl, ok := ln.(tlsListener); ok {
			// net/http serves HTTP/2 to TLS connections that negotiated it
			// when its TLSConfig offers h2, as the listener's does.
			hs.TLSConfig = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
			ln = tl.Listener
		}
		go func() { _ = hs.Serve(ln) }()
	}
}
