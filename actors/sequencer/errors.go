package sequencer

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var (
	// ErrStopped answers commands sent after the sequencer stopped.
	ErrStopped = status.Error(codes.Unavailable, "sequencer: stopped")
	// ErrJournal marks the failure of a journal write; after one, the
	// sequencer refuses every command (its state is ahead of the journal).
	ErrJournal = errors.New("sequencer: journal write failed")
)

func journalFailed(err error) error {
	return status.Error(codes.Internal, fmt.Errorf("%w: %v", ErrJournal, err).Error())
}
