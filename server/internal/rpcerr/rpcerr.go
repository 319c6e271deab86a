// Package rpcerr turns the errors revd's server packages meet into what a
// gRPC client gets.
package rpcerr

import "google.golang.org/grpc/status"

// Status returns err as a gRPC status error: a status error stays as it
// is, a context's error becomes its status (Canceled, DeadlineExceeded),
// and any other error a status with code Unknown and err's text. nil stays
// nil.
func Status(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if st := status.FromContextError(err); st != nil {
		return st.Err()
	}
	return err
}
