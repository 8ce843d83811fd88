package datastoreio

import (
	"context"
	"fmt"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/internal/retry"
)

// When the service refuses a commit of several mutations for a reason of
// its own request (INVALID_ARGUMENT: a name over 1,500 bytes, a reserved
// property, an entity too big; or a message over gRPC's size limit), its
// message names no key, and naming the batch's first keys would blame the
// wrong entities. The writer then finds the mutation refused: it commits the
// batch's mutations in halves, going on in the half that is refused, until
// one mutation is refused on its own (about 2*log2(n) commits, 18 for 500).
// Upserts and deletes are idempotent, so committing the accepted parts
// first changes nothing that the retried bundle would not write again. When
// both halves of a refused part are accepted, the refusal is of the batch
// as a whole and is reported as such.

// refusedAlone reports errors of a commit that bisecting can locate.
func refusedAlone(err error) bool {
	return status.Code(err) == codes.InvalidArgument || retry.MessageTooLarge(err)
}

// locateRefused commits parts of muts (the mutations of the batch items,
// refused together with a refusedAlone error) until one is refused on its
// own; it returns that mutation's index and error, and how many of the
// others the parts committed. ok is false when it
// found none: both halves of a refused part were accepted, or a part failed
// otherwise (its error is then lost; the batch's stands).
// committed counts the mutations the parts wrote.
func (w *writer) locateRefused(ctx context.Context, muts []*datastore.Mutation) (i, committed int, err error, ok bool) {
	lo, hi := 0, len(muts) // [lo, hi) is refused
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		err := w.commitPart(ctx, muts[lo:mid])
		if err == nil {
			committed += mid - lo
			err = w.commitPart(ctx, muts[mid:hi])
			if err == nil {
				return 0, committed + hi - mid, nil, false
			}
			lo = mid
		} else {
			hi = mid
		}
		if !refusedAlone(err) {
			return 0, committed, nil, false
		}
		if hi-lo == 1 {
			return lo, committed, err, true
		}
	}
	return 0, committed, nil, false
}

// commitPart commits muts once, counting what it writes.
func (w *writer) commitPart(ctx context.Context, muts []*datastore.Mutation) error {
	if err := w.c.commit(ctx, muts); err != nil {
		return err
	}
	w.tally(&commitsCounter, 1)
	if w.cfg.delete {
		w.tally(&entitiesDeleted, int64(len(muts)))
	} else {
		w.tally(&entitiesWritten, int64(len(muts)))
	}
	return nil
}

// refusedError describes batch b, whose mutation i alone was refused with
// err: project, database, the refused mutation's key, and the batch.
func (w *writer) refusedError(b *batch[pending], i, committed int, err error, attempts int) error {
	items := b.items
	return fmt.Errorf("datastoreio: commit of %d %s mutations to project %q, database %s refused after %d attempt(s); committed in parts, the %s of %s alone is refused (%d of the batch's other mutations were committed meanwhile): %w",
		len(items), w.op(), w.cfg.project, w.dbName(), attempts, w.op(), describeKey(items[i].key), committed, err)
}
