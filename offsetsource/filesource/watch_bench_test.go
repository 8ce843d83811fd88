package filesource

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkWatchClaim is the watch's per-file tracker cost: nextPending and
// TryClaim of one pending file per op, as emitPending calls them. The files
// are made pending by two polls before the timer starts.
func BenchmarkWatchClaim(b *testing.B) {
	files := make([]watchFile, b.N)
	for i := range files {
		files[i] = wf(fmt.Sprintf("gs://bucket/dir/part-%09d.avro", i))
	}
	never := termination{Total: -1, Idle: -1}
	rt := newWatchTracker(watchRestriction{Start: 1}, never, false, func() time.Time { return watchEpoch })
	if n := stablePoll(rt, files, watchEpoch); n != b.N {
		b.Fatalf("%d files pending, want %d", n, b.N)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		f, ok := rt.nextPending()
		if !ok || !rt.TryClaim(f.Path) {
			b.Fatal("claim refused")
		}
	}
}
