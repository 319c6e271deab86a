package conformance

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// WithToken is a request sent with an auth token in its "token" metadata,
// as etcd's clients send it.
type WithToken struct {
	proto.Message
	Token string
}

// tokenContext unwraps a WithToken, putting its token on ctx.
func tokenContext(ctx context.Context, req proto.Message) (context.Context, proto.Message) {
	if wt, ok := req.(WithToken); ok {
		return metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, wt.Token), wt.Message
	}
	return ctx, req
}

// Login authenticates user on both servers, compares the answers (tokens
// aside: each server makes its own) and keeps each server's token for
// DoAs. A failed login changes no token.
func (h *Harness) Login(label, user, password string) Answer {
	h.T.Helper()
	req := &pb.AuthenticateRequest{Name: user, Password: password}
	want, got := h.Ref.Call(req), h.Target.Call(req)
	for _, side := range []struct {
		s *Server
		a *Answer
	}{{h.Ref, &want}, {h.Target, &got}} {
		if side.a.Err != nil {
			continue
		}
		resp := proto.Clone(side.a.Resp).(*pb.AuthenticateResponse)
		if resp.Token == "" {
			h.T.Fatalf("%s: %s answered an empty token", label, side.s.Name)
		}
		if side.s.Tokens == nil {
			side.s.Tokens = map[string]string{}
		}
		side.s.Tokens[user], resp.Token = resp.Token, ""
		side.a.Resp = resp
	}
	if diff := h.compare(want, got); diff != "" {
		h.T.Fatalf("MISMATCH at %s: Authenticate %s\n%s\n%s answered:\n%s\n%s answered:\n%s",
			label, user, diff, h.Ref.Name, indent(want.String()), h.Target.Name, indent(got.String()))
	}
	return want
}

// DoAs is Do with the token Login got for user on each server ("" for a
// user never logged in: no token at all).
func (h *Harness) DoAs(label, user string, req proto.Message) Answer {
	h.T.Helper()
	ref, tgt := h.Ref.Tokens[user], h.Target.Tokens[user]
	if ref == "" {
		return h.Do(label, req)
	}
	return h.DoEach(label, WithToken{req, ref}, WithToken{req, tgt})
}

// SetToken makes DoAs send token for user to both servers (a token neither
// issued).
func (h *Harness) SetToken(user, token string) {
	for _, s := range []*Server{h.Ref, h.Target} {
		if s.Tokens == nil {
			s.Tokens = map[string]string{}
		}
		s.Tokens[user] = token
	}
}

// DoAsErr is DoAs comparing only whether each server refused the request,
// and with what error: for answers that legitimately differ (a lease's
// remaining TTL moves between the two calls).
func (h *Harness) DoAsErr(label, user string, req proto.Message) {
	h.T.Helper()
	ref, tgt := req, req
	if tok := h.Ref.Tokens[user]; tok != "" {
		ref, tgt = WithToken{req, tok}, WithToken{req, h.Target.Tokens[user]}
	}
	want, got := h.Ref.Call(ref), h.Target.Call(tgt)
	if want.Code() != got.Code() || want.Message() != got.Message() {
		h.T.Fatalf("MISMATCH at %s: %T\n%s answered %s\n%s answered %s", label, req, h.Ref.Name, want, h.Target.Name, got)
	}
}
