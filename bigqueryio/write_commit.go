package bigqueryio

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/googleapis/gax-go/v2"
)

// commitFn commits, for one table, every stream the append bundles output
// (BatchCommitWriteStreams: all of them or none), and outputs the table's
// result. WithAtLeastOnce the rows are already there: it only sums them.
type commitFn struct {
	Cfg  writeConfig
	Type beam.EncodedType // the element type, for WriteTruncate's schema

	mw *managedwriter.Client
	m  writeMetrics
}

func (f *commitFn) Setup() { f.m = newWriteMetrics(f.Cfg) }

func (f *commitFn) Teardown() {
	if f.mw != nil {
		f.mw.Close()
	}
}

func (f *commitFn) ProcessElement(ctx context.Context, res string, streams func(*streamDone) bool, emit func(TableResult)) error {
	p := strings.Split(res, "/")
	spec := p[1] + "." + p[3] + "." + p[5] // with its partition decorator, if any
	var names []string
	var rows int64
	seen := map[string]bool{}
	var sd streamDone
	for streams(&sd) {
		rows += sd.Rows
		if sd.Stream != "" && !seen[sd.Stream] {
			seen[sd.Stream] = true
			names = append(names, sd.Stream)
		}
	}
	sort.Strings(names)
	if f.Cfg.AtLeastOnce {
		emit(TableResult{Table: spec, Streams: names, Rows: rows, CommitTime: time.Now()})
		return nil
	}
	if f.mw == nil {
		mw, err := managedwriter.NewClient(ctx, p[1], f.Cfg.clientOptions()...)
		if err != nil {
			return fmt.Errorf("bigqueryio.Write to %s: %w", spec, err)
		}
		f.mw = mw
	}
	var at time.Time
	var err error
	if f.Cfg.Disposition == WriteTruncate {
		at, err = f.replace(ctx, res, spec, names)
	} else {
		at, err = f.commit(ctx, streamParent(names[0]), spec, names)
	}
	if err != nil {
		return err
	}
	f.m.committed.Inc(ctx, int64(len(names)))
	emit(TableResult{Table: spec, Streams: names, Rows: rows, CommitTime: at})
	return nil
}

// commit commits names to res, retrying transient failures: a commit that
// applied before its answer was lost answers STREAM_ALREADY_COMMITTED for
// every stream when retried, which is its success.
func (f *commitFn) commit(ctx context.Context, res, spec string, names []string) (time.Time, error) {
	bo := retryBackoff(f.Cfg.RetryBase)
	for retries := 0; ; retries++ {
		resp, err := f.mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: names})
		if err != nil {
			if appendTransient(err) && retries < f.Cfg.MaxRetries {
				if err := gax.Sleep(ctx, bo.Pause()); err != nil {
					return time.Time{}, err
				}
				continue
			}
			return time.Time{}, fmt.Errorf("bigqueryio.Write to %s: committing %d streams: %w", spec, len(names), err)
		}
		if errs := resp.GetStreamErrors(); len(errs) > 0 {
			all := true
			var msgs []string
			for _, e := range errs {
				all = all && e.GetCode() == storagepb.StorageError_STREAM_ALREADY_COMMITTED
				msgs = append(msgs, fmt.Sprintf("%s: %s: %s", e.GetEntity(), e.GetCode(), e.GetErrorMessage()))
			}
			if all && len(errs) == len(names) {
				return f.commitTime(ctx, names[0])
			}
			return time.Time{}, fmt.Errorf("bigqueryio.Write to %s: committing %d streams, nothing committed: %s", spec, len(names), strings.Join(msgs, "; "))
		}
		return resp.GetCommitTime().AsTime(), nil
	}
}

// commitTime is the commit time of a stream committed earlier.
func (f *commitFn) commitTime(ctx context.Context, name string) (time.Time, error) {
	ws, err := f.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: name})
	if err != nil {
		return time.Time{}, fmt.Errorf("bigqueryio.Write: reading committed stream %s: %w", name, err)
	}
	return ws.GetCommitTime().AsTime(), nil
}

// streamParent is the table a write stream belongs to, as the service
// named the stream (…/tables/t/streams/s, or t$partition for a stream made
// on a partition): the parent its commit names.
func streamParent(stream string) string {
	if i := strings.LastIndex(stream, "/streams/"); i >= 0 {
		return stream[:i]
	}
	return stream
}
