package serverproc

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
)

// PeerProxy stands between a member's peer URL and the members that reach
// it: an HTTP reverse proxy (raft's transport and revd's forwarding are
// HTTP, each request naming its sender in rafthttp's X-Server-From header),
// which can drop everything, or everything a given member sends: a network
// partition as the members see it (their connections fail, their streams
// end), made without touching the network.
type PeerProxy struct {
	ln  net.Listener
	srv *http.Server

	mu      sync.Mutex
	all     bool
	from    map[string]bool
	running map[*http.Request]running
}

type running struct {
	from   string
	cancel context.CancelFunc
}

// NewPeerProxy starts a proxy to target (a peer URL, http://) on a free
// loopback port.
func NewPeerProxy(target string) (*PeerProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &PeerProxy{ln: ln, from: map[string]bool{}, running: map[*http.Request]running{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // raft's streams, as they come
	rp.ErrorLog = nil
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from := r.Header.Get("X-Server-From")
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		p.mu.Lock()
		if p.all || p.from[from] {
			p.mu.Unlock()
			panic(http.ErrAbortHandler) // the connection drops
		}
		r = r.WithContext(ctx)
		p.running[r] = running{from, cancel}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.running, r)
			p.mu.Unlock()
		}()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's URL, to advertise instead of the member's.
func (p *PeerProxy) URL() string { return "http://" + p.ln.Addr().String() }

// CutAll drops (or, with on false, lets through again) everything.
func (p *PeerProxy) CutAll(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = on
	p.cutRunning()
}

// CutFrom drops (or lets through again) what member id sends.
func (p *PeerProxy) CutFrom(id uint64, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.from[strconv.FormatUint(id, 16)] = on
	p.cutRunning()
}

// cutRunning ends the requests under way that are now dropped (raft's
// long-lived streams among them); p.mu held.
func (p *PeerProxy) cutRunning() {
	for _, r := range p.running {
		if p.all || p.from[r.from] {
			r.cancel()
		}
	}
}

// Close stops the proxy.
func (p *PeerProxy) Close() { _ = p.srv.Close() }
