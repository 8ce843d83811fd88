package bqtest_test

import (
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestCopyJob: copy jobs through the official client (Copier, Wait,
// JobFromID): WRITE_TRUNCATE replaces the destination's rows and keeps its
// metadata, while a read session made before still reads the old rows;
// WRITE_EMPTY refuses a destination with rows, WRITE_APPEND appends,
// CREATE_IF_NEEDED makes a missing destination like the source and
// CREATE_NEVER refuses it; a destination partitioned otherwise, and a
// CopyJobError, fail the job and leave the destination as it was; a job
// id is used once.
func TestCopyJob(t *testing.T) {
	e := newWriteEnv(t)
	row := func(name string, v int64) []bigquery.Value { return []bigquery.Value{name, v} }
	add := func(name string, tbl bqtest.Table) {
		tbl.Schema = simpleSchema
		if err := e.srv.AddTable("proj.ds."+name, tbl); err != nil {
			t.Fatal(err)
		}
	}
	add("src", bqtest.Table{Rows: [][]bigquery.Value{row("n1", 1), row("n2", 2)}})
	add("dst", bqtest.Table{Rows: [][]bigquery.Value{row("old", 0)}, Description: "kept", Labels: map[string]string{"a": "b"}})
	add("parted", bqtest.Table{TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType}})
	ds := e.bq.DatasetInProject("proj", "ds")
	run := func(dst, id string, wd bigquery.TableWriteDisposition, cd bigquery.TableCreateDisposition) error {
		cp := ds.Table(dst).CopierFrom(ds.Table("src"))
		cp.JobID, cp.WriteDisposition, cp.CreateDisposition = id, wd, cd
		job, err := cp.Run(e.ctx)
		if err != nil {
			return err
		}
		st, err := job.Wait(e.ctx)
		if err != nil {
			return err
		}
		return st.Err()
	}
	// A read session of dst made before the copy.
	before := ds.Table("dst").Read(e.ctx)
	var first []bigquery.Value
	if err := before.Next(&first); err != nil {
		t.Fatal(err)
	}
	if err := run("dst", "", bigquery.WriteEmpty, bigquery.CreateIfNeeded); err == nil || !strings.Contains(err.Error(), "Already Exists") {
		t.Errorf("WRITE_EMPTY onto rows: %v", err)
	}
	if err := run("dst", "j1", bigquery.WriteTruncate, bigquery.CreateNever); err != nil {
		t.Fatal(err)
	}
	if got := names(e.read(t, "dst")); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("dst after WRITE_TRUNCATE: %v", got)
	}
	if !reflect.DeepEqual(first, row("old", 0)) {
		t.Errorf("the session made before read %v, want the old row", first)
	}
	if md, err := ds.Table("dst").Metadata(e.ctx); err != nil || md.Description != "kept" || md.Labels["a"] != "b" {
		t.Errorf("dst's metadata after the copy: %+v %v", md, err)
	}
	if job, err := e.bq.JobFromID(e.ctx, "j1"); err != nil {
		t.Errorf("jobs.get of j1: %v", err)
	} else if st, err := job.Wait(e.ctx); err != nil || st.Err() != nil || !st.Done() {
		t.Errorf("j1: %+v %v", st, err)
	}
	if err := run("dst", "j1", bigquery.WriteTruncate, bigquery.CreateNever); err == nil {
		t.Error("a second job j1 was accepted")
	}
	if err := run("dst", "", bigquery.WriteAppend, bigquery.CreateNever); err != nil {
		t.Fatal(err)
	}
	if got := names(e.read(t, "dst")); !reflect.DeepEqual(got, []string{"n1", "n2", "n1", "n2"}) {
		t.Errorf("dst after WRITE_APPEND: %v", got)
	}
	if err := run("made", "", bigquery.WriteEmpty, bigquery.CreateNever); err == nil || !strings.Contains(err.Error(), "Not found") {
		t.Errorf("CREATE_NEVER of a missing table: %v", err)
	}
	if err := run("made", "", bigquery.WriteEmpty, bigquery.CreateIfNeeded); err != nil {
		t.Fatal(err)
	}
	if got := names(e.read(t, "made")); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Errorf("made: %v", got)
	}
	if err := run("parted", "", bigquery.WriteTruncate, bigquery.CreateNever); err == nil || !strings.Contains(err.Error(), "Incompatible table partitioning") {
		t.Errorf("copy onto a partitioned table: %v", err)
	}
	e.srv.SetWriteFaults(bqtest.WriteFaults{CopyJobError: "injected"})
	if err := run("dst", "", bigquery.WriteTruncate, bigquery.CreateNever); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("copy with CopyJobError: %v", err)
	}
	if got := names(e.read(t, "dst")); len(got) != 4 {
		t.Errorf("dst after the failed copy: %v, want it unchanged", got)
	}
	if st := e.srv.WriteStats(); st.CopyJobs != 3 {
		t.Errorf("%d copy jobs wrote, want 3", st.CopyJobs)
	}
}
