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
	// ErrNotLeader refuses a command while this member does not lead (or,
	// a new leader, has not yet applied the log its election brought):
	// nothing of it was decided or proposed, so it may go to the leader.
	ErrNotLeader = status.Error(codes.Unavailable, "sequencer: not the leader")
	// ErrLost ends a command whose batch was proposed but that a later
	// leader's log replaced: it was never applied, and never will be. A
	// client cannot know that, and is told etcd's timeout (see server).
	ErrLost = errors.New("sequencer: proposal lost to a leader change")
	// ErrJournal marks the failure of a journal write; after one, the
	// sequencer refuses every command (its state is ahead of the journal).
	ErrJournal = errors.New("sequencer: journal write failed")
)

func journalFailed(err error) error {
	return status.Error(codes.Internal, fmt.Errorf("%w: %v", ErrJournal, err).Error())
}
