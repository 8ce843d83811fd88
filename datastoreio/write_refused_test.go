package datastoreio

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/internal/retry"
)

// refusingCommitter refuses, with err, every commit that holds a mutation
// of a key its refuse function names, or, with refuseOver, any commit of
// more than that many mutations.
type refusingCommitter struct {
	fakeCommitter
	refuse     func(*datastore.Key) bool
	refuseOver int
	err        error
}

func (f *refusingCommitter) commit(ctx context.Context, muts []*datastore.Mutation) error {
	f.attempts++
	if f.refuseOver > 0 && len(muts) > f.refuseOver {
		return f.err
	}
	for _, m := range muts {
		if f.refuse != nil && f.refuse(mutationKeyOf(m)) {
			return f.err
		}
	}
	f.commits = append(f.commits, muts)
	return nil
}

// mutationKeyOf reads a mutation's key back, through the sizer's capture.
func mutationKeyOf(m *datastore.Mutation) *datastore.Key {
	var muts []*pb.Mutation
	sz, _ := processSizer()
	_, _ = sz.client.Mutate(context.WithValue(context.Background(), captureKey{}, &muts), m)
	var pk *pb.Key
	switch op := muts[0].Operation.(type) {
	case *pb.Mutation_Upsert:
		pk = op.Upsert.Key
	case *pb.Mutation_Delete:
		pk = op.Delete
	}
	k, _ := protoToKey(pk)
	return k
}

// TestWriterNamesRefusedEntity: a batch of 500 refused with
// INVALID_ARGUMENT for one entity's sake names that entity, found in 18
// more commits at most, and is not retried; it says how many of the others
// were written meanwhile.
func TestWriterNamesRefusedEntity(t *testing.T) {
	for _, bad := range []int64{1, 137, 500} {
		f := &refusingCommitter{refuse: func(k *datastore.Key) bool { return k.ID == bad },
			err: status.Error(codes.InvalidArgument, `The property.name "__x__" is reserved.`)}
		w := testWriter(t, writerConfig{project: "p", maxRetries: 5, initialBackoff: time.Second}, f)
		w.sizes.record(w.now(), time.Millisecond, 500)
		ctx := context.Background()
		var err error
		for i := int64(1); i <= 500 && err == nil; i++ {
			k := datastore.IDKey("U", i, nil)
			k.Namespace = "ns"
			err = w.add(ctx, k, &unitEnt{K: k}, "unitEnt") // the 500th commits the batch
		}
		if err == nil {
			t.Fatal("the refused batch succeeded")
		}
		for _, want := range []string{"500 upsert mutations", "namespace ns, kind U, key U," + itoa(bad) + " alone is refused", `"__x__" is reserved`, "after 1 attempt"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("bad %d: error does not say %q: %v", bad, want, err)
			}
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("the cause is lost: %v", err)
		}
		written := 0
		for _, c := range f.commits {
			written += len(c)
		}
		if f.attempts > 19 || !strings.Contains(err.Error(), fmt.Sprintf("(%d of the batch's other mutations were committed meanwhile)", written)) {
			t.Errorf("bad %d: %d commits sent, %d mutations written; want at most 19, and the count said", bad, f.attempts, written)
		}
	}
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// TestWriterBatchRefusal: a refusal of the batch as a whole (every part
// accepted) is reported as the batch's, blaming no entity.
func TestWriterBatchRefusal(t *testing.T) {
	f := &refusingCommitter{refuseOver: 100, err: status.Error(codes.InvalidArgument, "request too large")}
	w := testWriter(t, writerConfig{project: "p", maxRetries: 5, initialBackoff: time.Second}, f)
	w.sizes.record(w.now(), time.Millisecond, 500)
	ctx := context.Background()
	for i := int64(1); i <= 300; i++ {
		k := datastore.IDKey("U", i, nil)
		if err := w.add(ctx, k, &unitEnt{K: k}, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	err := w.flush(ctx)
	if err == nil || strings.Contains(err.Error(), "alone") || !strings.Contains(err.Error(), "commit of 300 upsert mutations") || !strings.Contains(err.Error(), "request too large") {
		t.Fatalf("batch refusal reported as %v", err)
	}
	// The writer looked for a mutation refused alone before blaming the
	// batch: 300 refused, its halves of 150 refused, the first half's
	// halves of 75 both accepted. (Before, the batch's error came at once,
	// naming its first keys, with nothing committed.)
	if got := fmt.Sprint(batchSizes(f.commits)); got != "[75 75]" || f.attempts != 4 {
		t.Fatalf("accepted parts %s in %d attempts, want [75 75] in 4 (300, 150, 75, 75)", got, f.attempts)
	}
}

// TestDeterministicErrorsNotRetried: a message over gRPC's size limit
// (RESOURCE_EXHAUSTED, as quota errors are) is sent once; a quota error is
// retried.
func TestDeterministicErrorsNotRetried(t *testing.T) {
	for _, c := range []struct {
		err      error
		attempts int
	}{
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5242980 vs. 4194304)"), 1},
		{status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (11000000 vs. 10485760)"), 1},
		{status.Error(codes.InvalidArgument, "entity is too big"), 1},
		{status.Error(codes.ResourceExhausted, "Quota exceeded"), 4},
	} {
		f := &fakeCommitter{fail: func(int) error { return c.err }}
		w := testWriter(t, writerConfig{maxRetries: 3, initialBackoff: time.Millisecond}, f)
		k := datastore.IDKey("K", 7, nil)
		_ = w.add(context.Background(), k, &unitEnt{K: k}, "unitEnt")
		err := w.flush(context.Background())
		if err == nil || f.attempts != c.attempts {
			t.Errorf("%v: %d attempts (%v), want %d", c.err, f.attempts, err, c.attempts)
		}
		if retry.Transient(c.err, retry.Idempotent) != (c.attempts > 1) {
			t.Errorf("%v: retry.Transient = %v", c.err, retry.Transient(c.err, retry.Idempotent))
		}
	}
}
