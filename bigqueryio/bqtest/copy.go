package bqtest

import (
	"fmt"
	"net/http"
	"strings"

	"cloud.google.com/go/bigquery"
	bq "google.golang.org/api/bigquery/v2"
)

// insertCopyJob answers jobs.insert of a copy job: one source table into a
// destination table, as the service does it — at once and atomically (a
// read session made before keeps reading the destination as it was), by
// the dispositions (WRITE_EMPTY, the default, refuses a destination with
// rows; WRITE_TRUNCATE replaces its rows, schema and constraints (its
// primary key: the source's, or none) and keeps its other metadata;
// WRITE_APPEND appends, the schemas being equal;
// CREATE_IF_NEEDED, the default, makes a missing destination with the
// source's schema, partitioning and clustering; CREATE_NEVER refuses it).
// A destination partitioned otherwise than the source is refused, as the
// service refuses it. The job runs in its destination dataset's location,
// or in the location the request names (a destination dataset elsewhere
// is then not found); jobs.get finds a job outside the US and EU only
// with its location (see lookupJob). Errors end the job DONE with an
// error result, the destination as it was; WriteFaults.CopyJobError
// fails every copy job.
func (s *Server) insertCopyJob(w http.ResponseWriter, proj string, in *bq.Job) {
	c := in.Configuration.Copy
	ref := in.JobReference
	if ref == nil {
		ref = &bq.JobReference{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref.JobId == "" {
		ref.JobId = s.newID("job_")
	}
	key := "projects/" + proj + "/jobs/" + ref.JobId
	if s.q.jobs[key] != nil {
		restErrorReason(w, http.StatusConflict, "duplicate", "Already Exists: Job "+proj+":"+ref.JobId)
		return
	}
	// The job runs where its destination's dataset is, unless the request
	// names a location: then there, and a dataset elsewhere is not found.
	j := &job{QueryJob: QueryJob{Project: proj, JobID: ref.JobId, Location: ref.Location, RequestLocation: ref.Location}, copy: true}
	var dsLoc string
	if d := c.DestinationTable; d != nil {
		j.Destination = fmt.Sprintf("projects/%s/datasets/%s/tables/%s", d.ProjectId, d.DatasetId, d.TableId)
		dsLoc, _ = s.datasetLocationLocked(d.ProjectId, d.DatasetId)
	}
	switch {
	case j.Location == "":
		j.Location = locationOr(dsLoc)
	case dsLoc != "" && !strings.EqualFold(dsLoc, j.Location):
		d := c.DestinationTable
		j.Err = fmt.Sprintf("Not found: Dataset %s:%s was not found in location %s", d.ProjectId, d.DatasetId, j.Location)
	}
	if j.Err == "" {
		j.Err, j.rows = s.copyLocked(c)
	}
	if s.q.jobs == nil {
		s.q.jobs = map[string]*job{}
	}
	s.q.jobs[key] = j
	s.q.order = append(s.q.order, j)
	writeJSON(w, s.jobJSON(j, in.Configuration))
}

// copyLocked runs a copy job: it returns its error ("" for none) and the
// rows copied.
func (s *Server) copyLocked(c *bq.JobConfigurationTableCopy) (string, int) {
	if f := s.w.faults.CopyJobError; f != "" {
		return f, 0
	}
	srcs := c.SourceTables
	if c.SourceTable != nil {
		srcs = append([]*bq.TableReference{c.SourceTable}, srcs...)
	}
	switch {
	case len(srcs) != 1:
		return fmt.Sprintf("bqtest copies one source table, not %d", len(srcs)), 0
	case c.DestinationTable == nil:
		return "Required parameter is missing: destinationTable", 0
	case c.OperationType != "" && c.OperationType != "COPY":
		return "bqtest serves copy jobs of operation type COPY only, not " + c.OperationType, 0
	}
	sref, dref := srcs[0], c.DestinationTable
	src := s.tables[fmt.Sprintf("projects/%s/datasets/%s/tables/%s", sref.ProjectId, sref.DatasetId, sref.TableId)]
	if src == nil {
		return fmt.Sprintf("Not found: Table %s:%s.%s", sref.ProjectId, sref.DatasetId, sref.TableId), 0
	}
	dres := fmt.Sprintf("projects/%s/datasets/%s/tables/%s", dref.ProjectId, dref.DatasetId, dref.TableId)
	if strings.Contains(dref.TableId, "$") {
		return "bqtest does not copy into a partition decorator: " + dref.TableId, 0
	}
	dname := dref.ProjectId + ":" + dref.DatasetId + "." + dref.TableId
	dst := s.tables[dres]
	if _, ok := s.datasetLocationLocked(dref.ProjectId, dref.DatasetId); !ok {
		return fmt.Sprintf("Not found: Dataset %s:%s", dref.ProjectId, dref.DatasetId), 0
	}
	if dst == nil {
		if c.CreateDisposition == "CREATE_NEVER" {
			return "Not found: Table " + dname, 0
		}
		spec := Table{Schema: src.Schema, Location: src.Location, TimePartitioning: src.TimePartitioning,
			RangePartitioning: src.RangePartitioning, Clustering: src.Clustering, PrimaryKey: src.PrimaryKey}
		if k := c.DestinationEncryptionConfiguration; k != nil {
			spec.KMSKey = k.KmsKeyName
		}
		tb, err := newTable(dres, spec)
		if err != nil {
			return err.Error(), 0
		}
		s.tables[dres] = tb
		dst = tb
	}
	if !samePartitioning(&src.Table, &dst.Table) {
		return fmt.Sprintf("Incompatible table partitioning specification. Destination %s is partitioned %s, the source %s", dname, partitioningText(&dst.Table), partitioningText(&src.Table)), 0
	}
	rows, parts := src.Rows, src.parts
	switch c.WriteDisposition {
	case "", "WRITE_EMPTY":
		if len(dst.Rows) > 0 {
			return "Already Exists: Table " + dname, 0
		}
	case "WRITE_APPEND":
		if !sameSchema(src.Schema, dst.Schema) {
			return "Provided Schema does not match Table " + dname, 0
		}
		rows = append(append([][]bigquery.Value(nil), dst.Rows...), rows...)
		parts = append(append([]string(nil), dst.parts...), parts...)
	case "WRITE_TRUNCATE":
	default:
		return "Invalid write disposition " + c.WriteDisposition, 0
	}
	nt := &table{name: dres, Table: dst.Table, rowBytes: src.rowBytes, expires: dst.expires, origin: dst.lineage()}
	nt.Schema = src.Schema
	if c.WriteDisposition == "WRITE_TRUNCATE" {
		// The source's constraints replace the destination's, as its
		// schema does: a source without a primary key leaves the
		// destination without one.
		nt.PrimaryKey = src.PrimaryKey
	}
	nt.Rows = append([][]bigquery.Value(nil), rows...)
	nt.parts = append([]string(nil), parts...)
	s.tables[dres] = nt
	s.w.stats.CopyJobs++
	return "", len(src.Rows)
}

// samePartitioning tells tables partitioned alike (or neither).
func samePartitioning(a, b *Table) bool { return partitioningText(a) == partitioningText(b) }

func partitioningText(t *Table) string {
	switch {
	case t.TimePartitioning != nil:
		return fmt.Sprintf("by %s on %q", t.timeUnit(), strings.ToLower(t.TimePartitioning.Field))
	case t.RangePartitioning != nil:
		r := t.RangePartitioning.Range
		return fmt.Sprintf("by range on %q [%d, %d) by %d", strings.ToLower(t.RangePartitioning.Field), r.Start, r.End, r.Interval)
	}
	return "not at all"
}

// sameSchema tells schemas of the same columns, types and modes.
func sameSchema(a, b bigquery.Schema) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !strings.EqualFold(x.Name, y.Name) || x.Type != y.Type || x.Repeated != y.Repeated || x.Required != y.Required || !sameSchema(x.Schema, y.Schema) {
			return false
		}
	}
	return true
}
