package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"revd/client/natsclient"
)

// Authentication, as etcdctl's: --user, --password and --auth-jwt-token
// are read as etcdctl's authCfgFromCmd reads them, and the client
// authenticates as etcd's clientv3 does when it connects. Users, roles and
// the switch are managed with etcdctl over gRPC; revctl has "auth status".

// credentials are what the auth flags ask for.
type credentials struct {
	user, password string
	token          string // --auth-jwt-token: sent as it is
}

// errNoPassword is the answer to a --user without a password, where
// etcdctl would prompt for one on the terminal.
func errNoPassword(user string) error {
	return fmt.Errorf("--user %q has no password, and revctl does not prompt for one: give --user %s:PASSWORD or --password PASSWORD", user, user)
}

// credentials reads the auth flags as etcdctl does: a token wins; without
// one, no --user means no authentication; --password, when not empty, is
// the password of the whole --user; otherwise --user is split at its first
// ':'. A --user with no password at all is an error (etcdctl prompts).
func (g globalFlags) credentials() (credentials, error) {
	switch {
	case g.authToken != "":
		return credentials{token: g.authToken}, nil
	case g.user == "":
		return credentials{}, nil
	case g.password != "":
		return credentials{user: g.user, password: g.password}, nil
	}
	user, password, ok := strings.Cut(g.user, ":")
	if !ok {
		return credentials{}, errNoPassword(g.user)
	}
	return credentials{user: user, password: password}, nil
}

// tokenClient is what authentication needs; *natsclient.Client has it.
type tokenClient interface {
	WithToken(token string) *natsclient.Client
	WithUser(name, password string) *natsclient.Client
}

// login returns kv sending the token the credentials give, as clientv3
// does when it connects: a given token as it is; for a user and a password
// (both non-empty, or clientv3 does not authenticate) the one it logs in
// for, within --dial-timeout, and then again whenever revd no longer
// accepts it (a long watch outliving a restart of revd, say); and kv
// unchanged when there is nothing to send. Authentication off is not an
// error; a wrong password is rpctypes.ErrAuthFailed.
func (r *runner) login(kv kvClient, cred credentials) (kvClient, error) {
	if cred.token == "" && (cred.user == "" || cred.password == "") {
		return kv, nil
	}
	tc, ok := kv.(tokenClient)
	if !ok {
		return nil, errors.New("this client cannot authenticate")
	}
	if cred.token != "" {
		return tc.WithToken(cred.token), nil
	}
	user := tc.WithUser(cred.user, cred.password)
	ctx, cancel := context.WithTimeout(context.Background(), r.g.dialTimeout)
	defer cancel()
	if err := user.Login(ctx); err != nil {
		return nil, err
	}
	return user, nil
}

// authStatusClient is what auth status needs; *natsclient.Client has it.
type authStatusClient interface {
	AuthStatus(context.Context, *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error)
}

// authCommand is etcdctl's "auth status". Turning authentication on and off
// is etcdctl's, over gRPC: revd serves no NATS subject for it.
func authCommand(r *runner, fs *flagSet) func([]string) error {
	return func(args []string) error {
		if len(args) == 0 {
			r.usage([]string{"auth"})
			return nil
		}
		switch sub := args[0]; {
		case sub == "enable" || sub == "disable":
			return fmt.Errorf("revd serves no %q over NATS: use etcdctl auth %s", "auth "+sub, sub)
		case sub == "" || !strings.HasPrefix("status", sub):
			return fmt.Errorf("unknown command %q for \"revctl auth\"", sub)
		}
		if len(args) > 1 {
			return exitErrorf(exitBadArgs, "auth status command does not accept any arguments")
		}
		kv, err := r.client()
		if err != nil {
			return err
		}
		ac, ok := kv.(authStatusClient)
		if !ok {
			return errors.New("this client cannot ask for the auth status")
		}
		ctx, cancel := r.ctx()
		resp, err := ac.AuthStatus(ctx, &pb.AuthStatusRequest{})
		cancel()
		if err != nil {
			return err
		}
		return r.display.(authPrinter).AuthStatus(resp)
	}
}

// authPrinter prints auth status as etcdctl 3.7.3's printers do: simple,
// json and protobuf; etcdctl has no fields or table output for it.
type authPrinter interface {
	AuthStatus(*pb.AuthStatusResponse) error
}

var (
	_ authPrinter = (*simplePrinter)(nil)
	_ authPrinter = (*jsonPrinter)(nil)
	_ authPrinter = (*fieldsPrinter)(nil)
	_ authPrinter = (*pbPrinter)(nil)
	_ authPrinter = (*tablePrinter)(nil)
)

func (s *simplePrinter) AuthStatus(r *pb.AuthStatusResponse) error {
	fmt.Fprintln(s.w, "Authentication Status:", r.GetEnabled())
	fmt.Fprintln(s.w, "AuthRevision:", r.GetAuthRevision())
	return nil
}

func (p *jsonPrinter) AuthStatus(r *pb.AuthStatusResponse) error { return p.print(r) }
func (p *pbPrinter) AuthStatus(r *pb.AuthStatusResponse) error   { return p.print(r) }
func (p *fieldsPrinter) AuthStatus(*pb.AuthStatusResponse) error {
	return errUnsupportedFormat("fields")
}
func (t *tablePrinter) AuthStatus(*pb.AuthStatusResponse) error { return errUnsupportedFormat("table") }
