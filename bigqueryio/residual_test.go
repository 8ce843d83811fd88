package bigqueryio

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestResidualChains reads one stream as a runner would over many bundles:
// every restriction is read by a fresh tracker, split up to twice at random
// points by checkpoints (TrySplit(0)) and by SplitReadStream splits
// (TrySplit(f)), and every residual is read in turn, split again, and so on.
// This covers the residuals of a checkpoint (the same stream from an
// offset), of a split (the remainder from 0), of a checkpoint after a split
// (the primary stream from an offset) and of a split of a restriction that
// starts at an offset. All the rows of the stream come out once each, and
// every restriction starts at its own offset.
func TestResidualChains(t *testing.T) {
	const n = 60
	for _, format := range []DataFormat{Avro, Arrow} {
		var checkpoints, splits, cpAfterSplit, splitFromOffset int
		for seed := int64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("%d/seed%d", format, seed), func(t *testing.T) {
				srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
				numbersTable(t, srv, n)
				s := subject(t, srv, WithDataFormat(format))
				c := testClient(t, srv)
				rnd := rand.New(rand.NewSource(seed))
				ctx := context.Background()

				queue := []StreamRestriction{s.Restriction.(StreamRestriction)}
				var got []int64
				for bundles := 0; len(queue) > 0; bundles++ {
					if bundles > 500 {
						t.Fatalf("more than 500 bundles; queue %v", queue)
					}
					r := queue[0]
					queue = queue[1:]
					tr := NewStreamTracker(r, c, 0)
					at1 := 1 + rnd.Intn(6) // rows before the runner splits this bundle
					at2 := at1 + 1 + rnd.Intn(4)
					rows, first, split := 0, int64(-1), false
					err := s.Read(ctx, tr, func(row []bigquery.Value) {
						id := row[0].(int64)
						if first < 0 {
							first = id
						}
						got = append(got, id)
						rows++
						if rows != at1 && rows != at2 {
							return
						}
						f := 0.0
						if rnd.Intn(2) > 0 {
							f = rnd.Float64()
						}
						_, res, err := runnerSplit(tr, f)
						if err != nil {
							t.Errorf("TrySplit(%v) of %v: %v", f, r, err)
						}
						if res == nil {
							return
						}
						queue = append(queue, res.(StreamRestriction))
						if f == 0 {
							checkpoints++
							if split {
								cpAfterSplit++
							}
							return
						}
						splits++
						split = true
						if r.Start > 0 {
							splitFromOffset++
						}
					})
					if err != nil {
						t.Fatalf("reading %v: %v", r, err)
					}
					if !tr.IsDone() {
						t.Fatalf("tracker of %v not done after the read: %v", r, tr)
					}
					// Row ids are table offsets and a stream of the one-stream
					// session keeps the table's order, so a restriction from
					// an offset of the original stream begins with that row.
					if first >= 0 && r.Start > 0 && r.Stream == s.Restriction.(StreamRestriction).Stream && first != r.Start {
						t.Errorf("%v began with row %d, not at its offset", r, first)
					}
				}
				sorted := slices.Clone(got)
				slices.Sort(sorted)
				want := make([]int64, n)
				for i := range want {
					want[i] = int64(i)
				}
				if !slices.Equal(sorted, want) {
					t.Fatalf("rows read (sorted) %v, want each of 0..%d once", sorted, n-1)
				}
			})
		}
		t.Logf("format %d: %d checkpoints (%d after a split), %d splits (%d of a restriction from an offset)", format, checkpoints, cpAfterSplit, splits, splitFromOffset)
		if checkpoints == 0 || splits == 0 || cpAfterSplit == 0 || splitFromOffset == 0 {
			t.Errorf("format %d: the chains must exercise every kind of residual", format)
		}
	}
}
