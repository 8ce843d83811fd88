package bqwrite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/api/googleapi"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"github.com/sdfio/sdfio/internal/commitplan"
)

// WriteTruncate, in the Storage Write API, which cannot truncate (as Beam
// Java's FILE_LOADS does with its temporary tables):
//
//  1. an Impulse draws a random id for the run (a side input, so fixed
//     once computed: bundles retried see the same, each run of a pipeline
//     built once, a template, its own);
//  2. the first append bundle that meets a table creates it if needed
//     (CreateIfNeeded) and a staging table beside it, in its dataset,
//     named for the run, with its schema, partitioning, clustering, KMS
//     key and constraints (primary and foreign keys, which the copy gives
//     the table), expiring after stagingTTL; every bundle's PENDING streams write
//     to the staging table;
//  3. the commit step commits them to the staging table (all or none), then
//     runs a copy job staging -> table in WRITE_TRUNCATE, which replaces
//     the table's rows at once (readers see the old rows or the new, never
//     a part), and deletes the staging table;
//  4. a failed commit or copy job deletes the staging table and fails the
//     write: the table is as it was; so does a commit step that refuses
//     (a bundle passed a failure on, see appendFn.passOn). The copy job's
//     id is made of the streams it copies, and it runs in the location of
//     the table's dataset, named on its insert and every read of it, so a
//     retried commit step finds it and does not copy again. A copy whose
//     outcome is not known (its insert or a read of it failed, not the
//     job) fails the write saying so, and keeps the staging table for a
//     retry to finish.
//
// A static table that gets no rows is still replaced, by an empty one:
// an Impulse gives the commit step its key and the run's id, by which it
// tells an empty input from one whose bundles failed (truncateEvidence).

// stagingTTL is how long a staging table lives if nothing deletes it (a
// pipeline that dies between its appends and its copy job).
const stagingTTL = 24 * time.Hour

// newRunID is a random id of a run.
func newRunID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// stagingTable is the resource name of the staging table of the table res
// in the run run.
func stagingTable(res, run string) string { return res + "_sdfio_tmp_" + run }

// copyJobID is the id of the copy job that replaces the table res with the
// rows of streams (sorted): the commit plan's key, the same for every
// attempt of the commit step.
func copyJobID(res string, streams []string) string {
	return "sdfio_truncate_" + commitplan.Plan{Items: map[string][]string{res: streams}}.Key(res)
}

// runIDFn draws the id of a run (of a WriteTruncate).
type runIDFn struct{}

func (runIDFn) ProcessElement(_ []byte) string { return newRunID() }

// truncAppendFn is appendFn with the run's id as a side input, for
// WriteTruncate: the streams write to the run's staging tables.
type truncAppendFn struct {
	Fn *appendFn
}

func (f *truncAppendFn) Setup() { f.Fn.Setup() }

// Beam Go gives a DoFn's side inputs to StartBundle and FinishBundle too.

func (f *truncAppendFn) StartBundle(ctx context.Context, run string, emit func(string, streamDone), failed func(FailedRow)) {
	f.Fn.run = run
	f.Fn.StartBundle(ctx, emit, failed)
}

func (f *truncAppendFn) ProcessElement(ctx context.Context, x beam.X, run string, emit func(string, streamDone), failed func(FailedRow)) error {
	f.Fn.run = run
	return f.Fn.ProcessElement(ctx, x, emit, failed)
}

func (f *truncAppendFn) FinishBundle(ctx context.Context, run string, emit func(string, streamDone), failed func(FailedRow)) error {
	return f.Fn.FinishBundle(ctx, emit, failed)
}

func (f *truncAppendFn) Teardown() { f.Fn.Teardown() }

// makeStaging creates the staging table of the table res (which must
// exist) in the run run like it, and returns its resource name. A staging
// table made meanwhile by another worker is taken.
func (c writeConfig) makeStaging(ctx context.Context, res, run string) (string, error) {
	if run == "" {
		return "", fmt.Errorf("no run id for the staging table of %s (WriteTruncate's append step runs with the run id as a side input)", res)
	}
	client, err := c.rest(ctx, projectOf(res))
	if err != nil {
		return "", err
	}
	defer client.Close()
	md, err := client.Table(res).Metadata(ctx)
	if err != nil {
		return "", fmt.Errorf("reading the table's metadata (WriteTruncate): %w", err)
	}
	staging := stagingTable(res, run)
	// The table's constraints (primary and foreign keys) too: the copy
	// job in WRITE_TRUNCATE gives the table the staging table's, and a
	// table that lost its primary key takes no more CDC changes.
	err = client.Table(staging).Create(ctx, &bigquery.TableMetadata{
		Schema: md.Schema, TimePartitioning: md.TimePartitioning, RangePartitioning: md.RangePartitioning,
		Clustering: md.Clustering, EncryptionConfig: md.EncryptionConfig, TableConstraints: md.TableConstraints,
		Description:    "sdfio bqwrite.Write staging table (WriteTruncate) of " + md.FullID,
		ExpirationTime: time.Now().Add(stagingTTL),
	})
	if err != nil && !isHTTP(err, http.StatusConflict) {
		return "", fmt.Errorf("creating the staging table %s (WriteTruncate): %w", staging, err)
	}
	return staging, nil
}

// jobLocation is where the copy job into the table res runs: the
// location of the table's dataset (tables.get reports it with the
// table). A job outside the US and EU multi-regions is found only with
// its location: jobs.get without it answers 404.
func jobLocation(md *bigquery.TableMetadata) string { return md.Location }

// copyUnknown is the error of a copy job whose outcome is not known (its
// insert or a read of its status failed, not the job): the table may have
// been replaced, and the staging table is kept, for a retry of the commit
// step to find the job by its id.
func copyUnknown(spec, jobID, staging string, err error) error {
	return fmt.Errorf("bqwrite.Write to %s: the copy job %s replacing the table with %s (WriteTruncate): its outcome is unknown, the table may have been replaced or not; the staging table is kept for a retry to find the job (it expires in %v): %w", spec, jobID, staging, stagingTTL, err)
}

// refused tells an insert the service refused (a 4xx answer other than
// 408, 409 and 429): the job was not made, so it did not run.
func refused(err error) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code >= 400 && e.Code < 500 && e.Code != http.StatusConflict && e.Code != http.StatusRequestTimeout && e.Code != http.StatusTooManyRequests
}

// replace commits names to the staging table of the table res and copies
// it over the table (WRITE_TRUNCATE), then deletes it; it returns when the
// copy ended. See WriteTruncate above. The copy job runs in the location
// of the table's dataset, named on its insert and on every read of it.
func (f *commitFn) replace(ctx context.Context, res, spec string, names []string) (time.Time, error) {
	project := projectOf(res)
	client, err := f.Cfg.rest(ctx, project)
	if err != nil {
		return time.Time{}, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
	}
	defer client.Close()
	// No rows: a staging table of its own, and no retry to recognize (an
	// empty copy twice is one).
	staging, jobID := stagingTable(res, newRunID()), copyJobID(res, []string{newRunID()})
	if len(names) > 0 {
		staging, jobID = streamParent(names[0]), copyJobID(res, names)
		md, err := client.Table(res).Metadata(ctx)
		if err != nil {
			return time.Time{}, fmt.Errorf("bqwrite.Write to %s: reading the table's metadata (WriteTruncate): %w", spec, err)
		}
		if job, err := client.JobFromProject(ctx, project, jobID, jobLocation(md)); err == nil {
			// A retry of this step: the copy was started before.
			st, err := bqcore.WaitJob(ctx, job)
			var je *bqcore.JobError
			switch {
			case errors.As(err, &je):
				return time.Time{}, fmt.Errorf("bqwrite.Write to %s: the copy job %s of an earlier attempt failed, the table left as it was: %w", spec, jobID, err)
			case err != nil:
				return time.Time{}, copyUnknown(spec, jobID, staging, err)
			}
			return bqcore.EndTime(st), f.dropStaging(ctx, client, staging, spec)
		} else if !isHTTP(err, http.StatusNotFound) {
			return time.Time{}, fmt.Errorf("bqwrite.Write to %s: looking for the copy job %s in location %q: %w", spec, jobID, jobLocation(md), err)
		}
	}
	fail := func(err error) (time.Time, error) {
		if derr := f.dropStaging(ctx, client, staging, spec); derr != nil {
			log.Warnf(ctx, "%v", derr)
		}
		return time.Time{}, err
	}
	if len(names) == 0 {
		// No rows: the table is replaced by an empty one.
		if err := f.emptyStaging(ctx, res, staging); err != nil {
			return fail(fmt.Errorf("bqwrite.Write to %s: %w", spec, err))
		}
	} else if _, err := f.commit(ctx, streamParent(names[0]), spec, names); err != nil {
		return fail(err)
	}
	md, err := client.Table(res).Metadata(ctx)
	if err != nil {
		return fail(fmt.Errorf("bqwrite.Write to %s: reading the table's metadata (WriteTruncate): %w", spec, err))
	}
	loc := jobLocation(md)
	cp := client.Table(res).CopierFrom(client.Table(staging))
	cp.JobID, cp.ProjectID, cp.Location = jobID, project, loc
	cp.WriteDisposition, cp.CreateDisposition = bigquery.WriteTruncate, bigquery.CreateNever
	cp.DestinationEncryptionConfig = md.EncryptionConfig
	job, err := cp.Run(ctx)
	if isHTTP(err, http.StatusConflict) {
		// The job is there: the client's retry of an insert whose answer
		// was lost, or an attempt of this step before.
		job, err = client.JobFromProject(ctx, project, jobID, loc)
		if err != nil {
			return time.Time{}, copyUnknown(spec, jobID, staging, fmt.Errorf("reading the job back in location %q: %w", loc, err))
		}
	} else if refused(err) {
		return fail(fmt.Errorf("bqwrite.Write to %s: the copy job %s replacing the table with %s (WriteTruncate) was refused, the table left as it was: %w", spec, jobID, staging, err))
	} else if err != nil {
		return time.Time{}, copyUnknown(spec, jobID, staging, err)
	}
	st, err := bqcore.WaitJob(ctx, job)
	var je *bqcore.JobError
	switch {
	case errors.As(err, &je):
		// The job ended failed: a copy job is atomic, it changed nothing.
		return fail(fmt.Errorf("bqwrite.Write to %s: the copy job %s replacing the table with %s (WriteTruncate), the table left as it was: %w", spec, jobID, staging, err))
	case err != nil:
		return time.Time{}, copyUnknown(spec, jobID, staging, err)
	}
	return bqcore.EndTime(st), f.dropStaging(ctx, client, staging, spec)
}

// emptyStaging makes the table res (CreateIfNeeded) and the staging table
// staging, empty, for a write without rows.
func (f *commitFn) emptyStaging(ctx context.Context, res, staging string) error {
	if f.Cfg.Create == CreateIfNeeded {
		schema, err := writeSchema(f.Cfg, f.Type.T)
		if err != nil {
			return err
		}
		p := strings.Split(res, "/")
		if err := f.Cfg.checkTable(ctx, p[1], p[3], p[5], "", schema, f.Cfg.Spec); err != nil {
			return err
		}
	}
	_, err := f.Cfg.makeStaging(ctx, res, strings.TrimPrefix(staging, res+"_sdfio_tmp_"))
	return err
}

// dropStaging deletes a staging table, retrying transient failures; one
// already gone is fine.
func (f *commitFn) dropStaging(ctx context.Context, client *restClient, staging, spec string) error {
	// Idempotent: a second delete finds the table gone (NOT_FOUND), done.
	if err := client.Table(staging).Delete(ctx); err != nil && !isHTTP(err, http.StatusNotFound) {
		return fmt.Errorf("bqwrite.Write to %s: deleting the staging table %s (it expires in %v): %w", spec, staging, stagingTTL, err)
	}
	return nil
}

// truncateKeyFn gives the commit step of a WriteTruncate of one table its
// key, so that the table is replaced even when no row comes, and the
// run's id, by which it finds the evidence that rows came
// (truncateEvidence).
type truncateKeyFn struct {
	Table string
}

func (f *truncateKeyFn) ProcessElement(_ []byte, run string, emit func(string, streamDone)) {
	emit(f.Table, streamDone{Key: true, Run: run})
}

// truncateKey is the key's PCollection of a WriteTruncate of one table.
func truncateKey(s beam.Scope, table string, run beam.PCollection) beam.PCollection {
	return beam.ParDo(s, &truncateKeyFn{Table: table}, beam.Impulse(s), beam.SideInput{Input: run})
}

// truncateEvidence is the evidence that append bundles began writing the
// table res in the run run, for a commit step to which none reported
// (commitplan.Expect.Began): the run's staging table, which the first
// bundle meeting the table makes, exists. "" when it does not: no bundle
// had a row for the table, and replacing it by an empty one is right.
func (f *commitFn) truncateEvidence(ctx context.Context, res, run string) (string, error) {
	client, err := f.Cfg.rest(ctx, projectOf(res))
	if err != nil {
		return "", err
	}
	defer client.Close()
	staging := stagingTable(res, run)
	_, err = client.Table(staging).Metadata(ctx)
	switch {
	case isHTTP(err, http.StatusNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("looking for the staging table %s (WriteTruncate): %w", staging, err)
	}
	return fmt.Sprintf("the run's staging table %s exists: an append bundle had rows for the table, and its streams never came (the bundle failed)", staging), nil
}

// dropStagings deletes, for a commit step of the table res that refused,
// the staging tables of a WriteTruncate: the run's (run, when known) and
// those the streams reported write to.
func (f *commitFn) dropStagings(ctx context.Context, res, spec, run string, reports []commitplan.Report) {
	var tables []string
	if run != "" {
		tables = append(tables, stagingTable(res, run))
	}
	for _, r := range reports {
		if t := streamParent(r.Item); strings.HasPrefix(t, res+"_sdfio_tmp_") && !slices.Contains(tables, t) {
			tables = append(tables, t)
		}
	}
	f.dropTables(ctx, tables)
}

// dropTables deletes the staging tables of a write that failed; a failure
// to delete one is logged (it expires after stagingTTL).
func (f *commitFn) dropTables(ctx context.Context, tables []string) {
	for _, t := range tables {
		spec := tableSpecOf(t)
		if i := strings.Index(t, "_sdfio_tmp_"); i > 0 {
			spec = tableSpecOf(t[:i]) // the destination's
		}
		client, err := f.Cfg.rest(ctx, projectOf(t))
		if err != nil {
			log.Warnf(ctx, "bqwrite.Write: deleting the staging table %s: %v", spec, err)
			continue
		}
		if err := f.dropStaging(ctx, client, t, spec); err != nil {
			log.Warnf(ctx, "%v", err)
		}
		client.Close()
	}
}
