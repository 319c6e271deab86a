package main

import (
	"context"
	"fmt"

	"revd/projections/statehash"
	maintenancev1 "revd/protos/revd/maintenance/v1"
)

// maintenanceClient is what journal checkpoint and hash need;
// *natsclient.Client has it.
type maintenanceClient interface {
	Checkpoint(context.Context, *maintenancev1.CheckpointRequest) (*maintenancev1.CheckpointResponse, error)
	Hash(context.Context, *maintenancev1.HashRequest) (*maintenancev1.HashResponse, error)
}

func (r *runner) maintenance() (maintenanceClient, error) {
	kv, err := r.client()
	if err != nil {
		return nil, err
	}
	mc, ok := kv.(maintenanceClient)
	if !ok {
		return nil, fmt.Errorf("this client cannot ask for checkpoints or hashes")
	}
	return mc, nil
}

// journalCheckpoint asks the running server for a checkpoint in DIR, made
// absolute against revctl's working directory (the server writes it, on
// its own machine).
func (r *runner) journalCheckpoint(args []string) error {
	if err := needArgs("checkpoint", args, 1, "one argument: the directory to create"); err != nil {
		return err
	}
	dir, err := absDir(args[0])
	if err != nil {
		return err
	}
	mc, err := r.maintenance()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	resp, err := mc.Checkpoint(ctx, &maintenancev1.CheckpointRequest{Dir: dir})
	cancel()
	if err != nil {
		return err
	}
	fmt.Fprintf(r.stdout, "checkpoint written to %s at revision %d (compact revision %d, base revision %d)\n",
		resp.Dir, resp.Revision, resp.CompactRevision, resp.BaseRevision)
	return nil
}

// journalHash prints the running server's state hash, in the words of
// journal verify, so the two can be compared.
func (r *runner) journalHash(args []string, o journalOptions) error {
	if err := needArgs("hash", args, 0, ""); err != nil {
		return err
	}
	mc, err := r.maintenance()
	if err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	resp, err := mc.Hash(ctx, &maintenancev1.HashRequest{Revision: o.rev})
	cancel()
	if err != nil {
		return err
	}
	if len(resp.Hash) != statehash.Size {
		return fmt.Errorf("the server's hash has %d bytes, want %d", len(resp.Hash), statehash.Size)
	}
	fmt.Fprintf(r.stdout, "state hash at revision %d: %s (%d keys)\n", resp.Revision, statehash.Sum(resp.Hash), resp.Keys)
	return nil
}
