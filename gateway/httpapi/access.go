package httpapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"

	"go.etcd.io/etcd/pkg/v3/httputil"

	"revd/internal/netconn"
)

// accessController is what etcd puts in front of its client port's HTTP
// endpoints (embed/serve.go's accessController), in its order: old
// /v3beta/ paths become /v3/; over plain HTTP, a Host not in the
// whitelist gets 421; over TLS, with RefuseCertCN, a gateway request
// whose client certificate names a CommonName gets 400; CORS headers; an
// OPTIONS request is answered 200 with nothing else.
type accessController struct {
	opts Options
	mux  http.Handler
}

func (ac *accessController) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if strings.HasPrefix(req.URL.Path, "/v3beta/") { // as etcd, for old clients
		req.URL.Path = "/v3/" + strings.TrimPrefix(req.URL.Path, "/v3beta/")
	}
	tlsState := connTLS(req)
	if tlsState == nil {
		if host := httputil.GetHostname(req); !allowed(ac.opts.HostWhitelist, host) {
			http.Error(w, hostRefused(host), http.StatusMisdirectedRequest)
			return
		}
	} else if ac.opts.RefuseCertCN != nil && strings.HasPrefix(req.URL.Path, "/v3/") && ac.opts.RefuseCertCN() {
		for _, chain := range tlsState.VerifiedChains {
			if len(chain) > 0 && chain[0].Subject.CommonName != "" {
				http.Error(w, "CommonName of client sending a request against gateway will be ignored and not used as expected", http.StatusBadRequest)
				return
			}
		}
	}
	if allowed(ac.opts.CORS, "*") {
		corsHeaders(w, "*")
	} else if origin := req.Header.Get("Origin"); allowed(ac.opts.CORS, origin) {
		corsHeaders(w, origin)
	}
	if req.Method == http.MethodOptions {
		w.WriteHeader(http.StatusOK)
		return
	}
	ac.mux.ServeHTTP(w, req)
}

// allowed reports whether v is in set, as etcd's access controller reads
// its lists: an empty one, or one holding "*", allows everything.
func allowed(set map[string]struct{}, v string) bool {
	if len(set) == 0 {
		return true
	}
	if _, ok := set["*"]; ok {
		return true
	}
	_, ok := set[v]
	return ok
}

func corsHeaders(w http.ResponseWriter, origin string) {
	w.Header().Add("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE")
	w.Header().Add("Access-Control-Allow-Origin", origin)
	w.Header().Add("Access-Control-Allow-Headers", "accept, content-type, authorization")
}

// hostRefused is etcd's answer to a Host not in the whitelist.
func hostRefused(host string) string {
	return fmt.Sprintf(`
etcd received your request, but the Host header was unrecognized.

To fix this, choose one of the following options:
- Enable TLS, then any HTTPS request will be allowed.
- Add the hostname you want to use to the whitelist in settings.
  - e.g. etcd --host-whitelist %q

This requirement has been added to help prevent "DNS Rebinding" attacks (CVE-2018-5702).
`, host)
}

// tlsConnKey holds, in a request's context, its connection's *tls.Conn.
type tlsConnKey struct{}

// ConnContext is the http.Server.ConnContext of a server whose connections
// come wrapped (Split's, over TLS): it notes the *tls.Conn under c, found
// through NetConn, so that the handlers know a request came over TLS and
// with which client certificate, as net/http's req.TLS tells of the
// connections it wraps itself.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := netconn.Under[*tls.Conn](c); ok {
		return context.WithValue(ctx, tlsConnKey{}, tc)
	}
	return ctx
}

// connTLS is the TLS state of req's connection, nil over plain HTTP.
func connTLS(req *http.Request) *tls.ConnectionState {
	if req.TLS != nil {
		return req.TLS
	}
	if tc, ok := req.Context().Value(tlsConnKey{}).(*tls.Conn); ok {
		st := tc.ConnectionState()
		return &st
	}
	return nil
}
