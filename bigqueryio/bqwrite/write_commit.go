package bqwrite

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/internal/commitplan"
	"github.com/sdfio/sdfio/internal/retry"
)

// commitFn commits, for one table, every stream the append bundles output
// (BatchCommitWriteStreams: all of them or none), and outputs the table's
// result. WithAtLeastOnce the rows are already there: it only sums them.
//
// It commits by internal/commitplan's rule, which avroio's finalize step
// shares: no bundle may have passed a failure on (the failures of every
// bundle come as a side input, so that every table's commit step refuses
// and nothing of a failed write is visible; the one of failedKey fails
// the write even when no stream came); a stream delivered twice is
// committed and counted once; and a WriteTruncate of one table to which
// no bundle reported replaces the table by an empty one only when no
// bundle began writing it (truncateEvidence). Otherwise it commits
// nothing (deleting a WriteTruncate's staging table) and fails, naming
// what is missing.
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

func (f *commitFn) ProcessElement(ctx context.Context, res string, streams, failures func(*streamDone) bool, emit func(TableResult)) error {
	var reports []commitplan.Report
	var staging []string // of failures
	key, run := false, ""
	for _, iter := range []func(*streamDone) bool{streams, failures} {
		var sd streamDone
		for iter(&sd) {
			if sd.Key {
				key, run = true, sd.Run
				continue
			}
			reports = append(reports, commitplan.Report{Group: res, Shard: commitplan.Unsharded, Item: sd.Stream, Count: sd.Rows, Err: sd.Err})
			for _, t := range sd.Staging {
				if !slices.Contains(staging, t) {
					staging = append(staging, t)
				}
			}
		}
	}
	if res == failedKey {
		_, err := commitplan.Make(reports, commitplan.Expect{})
		if err == nil {
			return nil
		}
		f.dropTables(ctx, staging)
		return fmt.Errorf("bqwrite.Write failed, and nothing was committed to any table: %w", err)
	}
	if f.Cfg.AtLeastOnce {
		// Nothing to commit: every bundle appended to the _default
		// stream, visible at once, and reports its rows there.
		var names []string
		var rows int64
		for _, r := range reports {
			rows += r.Count
			if r.Item != "" && !slices.Contains(names, r.Item) {
				names = append(names, r.Item)
			}
		}
		sort.Strings(names)
		emit(TableResult{Table: tableSpecOf(res), Streams: names, Rows: rows, CommitTime: time.Now()})
		return nil
	}
	p := strings.Split(res, "/")
	spec := tableSpecOf(res)
	want := commitplan.Expect{}
	plan, err := commitplan.Make(reports, want)
	if err == nil && len(plan.Groups) == 0 && run != "" && f.Cfg.Disposition == WriteTruncate {
		// No bundle reported: an empty input, unless one began.
		why, eerr := f.truncateEvidence(ctx, res, run)
		if eerr != nil {
			return fmt.Errorf("bqwrite.Write to %s: %w", spec, eerr)
		}
		if why != "" {
			want.Began = map[string]string{res: why}
			plan, err = commitplan.Make(reports, want)
		}
	}
	if err != nil {
		if f.Cfg.Disposition == WriteTruncate {
			f.dropStagings(ctx, res, spec, run, reports)
			return fmt.Errorf("bqwrite.Write to %s failed, and nothing was committed (the table left as it was): %w", spec, err)
		}
		return fmt.Errorf("bqwrite.Write to %s failed, and nothing was committed to it: %w", spec, err)
	}
	names, rows := plan.Items[res], plan.Counts[res]
	if len(names) == 0 && !key {
		return nil // every row refused: no stream, no result
	}
	if f.mw == nil {
		mw, err := newManagedWriter(ctx, f.Cfg, p[1])
		if err != nil {
			return fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
		f.mw = mw
	}
	var at time.Time
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

// tableSpecOf is project.dataset.table of the table resource res, with
// its partition decorator, if any.
func tableSpecOf(res string) string {
	p := strings.Split(res, "/")
	return p[1] + "." + p[3] + "." + p[5]
}

// commit commits names to res, retrying transient failures: a commit that
// applied before its answer was lost answers STREAM_ALREADY_COMMITTED for
// every stream when retried, which is its success: the commit is
// idempotent, and every transient code is retried.
func (f *commitFn) commit(ctx context.Context, res, spec string, names []string) (time.Time, error) {
	r := retryBackoff(f.Cfg.MaxRetries, f.Cfg.RetryBase).Start()
	for {
		resp, err := f.mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: names})
		if err != nil {
			if err := r.Retry(ctx, err, retry.Transient(err, retry.Idempotent),
				fmt.Sprintf("bqwrite.Write to %s: BatchCommitWriteStreams of %d streams", spec, len(names))); err != nil {
				return time.Time{}, err
			}
			continue
		}
		if errs := resp.GetStreamErrors(); len(errs) > 0 {
			all := true
			var msgs, done []string
			for _, e := range errs {
				if e.GetCode() == storagepb.StorageError_STREAM_ALREADY_COMMITTED {
					done = append(done, e.GetEntity())
				} else {
					all = false
				}
				msgs = append(msgs, fmt.Sprintf("%s: %s: %s", e.GetEntity(), e.GetCode(), e.GetErrorMessage()))
			}
			if all {
				// A retry of a commit that applied, its answer lost.
				retried, err := commitplan.Retried(names, done)
				if retried {
					return f.commitTime(ctx, names[0])
				}
				if err != nil {
					msgs = append(msgs, err.Error())
				}
			}
			return time.Time{}, fmt.Errorf("bqwrite.Write to %s: committing %d streams, nothing committed: %s", spec, len(names), strings.Join(msgs, "; "))
		}
		return resp.GetCommitTime().AsTime(), nil
	}
}

// commitTime is the commit time of a stream committed earlier.
func (f *commitFn) commitTime(ctx context.Context, name string) (time.Time, error) {
	ws, err := f.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: name})
	if err != nil {
		return time.Time{}, fmt.Errorf("bqwrite.Write: reading committed stream %s: %w", name, err)
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
