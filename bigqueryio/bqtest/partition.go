package bqtest

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	bq "google.golang.org/api/bigquery/v2"
)

// Partition ids of rows that fall in no partition of their own, as the
// service names them: a NULL partitioning column, and a value outside an
// integer range.
const (
	NullPartition          = "__NULL__"
	UnpartitionedPartition = "__UNPARTITIONED__"
)

// maxClusteringColumns is the most columns a table is clustered by.
const maxClusteringColumns = 4

// checkTableMeta checks a table's partitioning and clustering against its
// schema as tables.insert does: one kind of partitioning at most, a
// partitioning column that exists at the top level and is DATE, DATETIME
// or TIMESTAMP (time; DATE not by HOUR) or INTEGER (range), a range of at
// least one interval, and at most four clustering columns of top-level,
// non-repeated columns of a type that clusters.
func checkTableMeta(t *Table) error {
	if err := checkPrimaryKey(t); err != nil {
		return err
	}
	if t.TimePartitioning != nil && t.RangePartitioning != nil {
		return fmt.Errorf("a table has time partitioning or range partitioning, not both")
	}
	if tp := t.TimePartitioning; tp != nil {
		switch tp.Type {
		case "", bigquery.DayPartitioningType, bigquery.HourPartitioningType, bigquery.MonthPartitioningType, bigquery.YearPartitioningType:
		default:
			return fmt.Errorf("Invalid time partitioning type %s: want DAY, HOUR, MONTH or YEAR", tp.Type)
		}
		if tp.Expiration < 0 {
			return fmt.Errorf("Invalid time partitioning expiration %v", tp.Expiration)
		}
		if tp.Field != "" {
			f := topColumn(t.Schema, tp.Field)
			switch {
			case f == nil:
				return fmt.Errorf("The field specified for time partitioning can only be of type TIMESTAMP, DATE or DATETIME. The type found is: no such field %s", tp.Field)
			case f.Repeated || (f.Type != bigquery.DateFieldType && f.Type != bigquery.TimestampFieldType && f.Type != bigquery.DateTimeFieldType):
				return fmt.Errorf("The field specified for time partitioning can only be of type TIMESTAMP, DATE or DATETIME. The type found is: %s%s", repeatedWord(f), f.Type)
			case f.Type == bigquery.DateFieldType && tp.Type == bigquery.HourPartitioningType:
				return fmt.Errorf("Partitioning by HOUR is not supported on DATE field %s", tp.Field)
			}
		}
	}
	if rp := t.RangePartitioning; rp != nil {
		f := topColumn(t.Schema, rp.Field)
		switch {
		case f == nil:
			return fmt.Errorf("The field specified for range partitioning was not found in the schema: %s", rp.Field)
		case f.Repeated || f.Type != bigquery.IntegerFieldType:
			return fmt.Errorf("The field specified for range partitioning can only be of type INTEGER. The type found is: %s%s", repeatedWord(f), f.Type)
		case rp.Range == nil || rp.Range.Interval <= 0 || rp.Range.End <= rp.Range.Start:
			return fmt.Errorf("Invalid range partitioning of field %s: want start < end and an interval > 0", rp.Field)
		case (rp.Range.End-rp.Range.Start)/rp.Range.Interval > 10000:
			return fmt.Errorf("Too many partitions in the range partitioning of field %s: at most 10000", rp.Field)
		}
	}
	if c := t.Clustering; c != nil {
		if len(c.Fields) == 0 || len(c.Fields) > maxClusteringColumns {
			return fmt.Errorf("Too many clustering fields: %d, only %d are allowed", len(c.Fields), maxClusteringColumns)
		}
		seen := map[string]bool{}
		for _, name := range c.Fields {
			f := topColumn(t.Schema, name)
			switch {
			case f == nil:
				return fmt.Errorf("The field specified for clustering cannot be found in the schema. Invalid field: %s", name)
			case seen[strings.ToLower(name)]:
				return fmt.Errorf("Duplicate clustering field: %s", name)
			case f.Repeated || !clusters(f.Type):
				return fmt.Errorf("Field %s is of type %s%s, which is not supported for clustering", name, repeatedWord(f), f.Type)
			}
			seen[strings.ToLower(name)] = true
		}
	}
	return nil
}

func repeatedWord(f *bigquery.FieldSchema) string {
	if f.Repeated {
		return "REPEATED "
	}
	return ""
}

// clusters tells the column types a table may be clustered by.
func clusters(t bigquery.FieldType) bool {
	switch t {
	case bigquery.BigNumericFieldType, bigquery.BooleanFieldType, bigquery.DateFieldType, bigquery.DateTimeFieldType,
		bigquery.GeographyFieldType, bigquery.IntegerFieldType, bigquery.NumericFieldType, bigquery.StringFieldType,
		bigquery.TimestampFieldType:
		return true
	}
	return false
}

// topColumn is the top-level column named name (case-insensitive), or nil.
func topColumn(schema bigquery.Schema, name string) *bigquery.FieldSchema {
	i := columnIndex(schema, name)
	if i < 0 {
		return nil
	}
	return schema[i]
}

func columnIndex(schema bigquery.Schema, name string) int {
	for i, f := range schema {
		if strings.EqualFold(f.Name, name) {
			return i
		}
	}
	return -1
}

// ingestionTime tells a table partitioned by the time rows arrive
// (_PARTITIONTIME), which keeps each row's partition beside it.
func (t *Table) ingestionTime() bool {
	return t.TimePartitioning != nil && t.TimePartitioning.Field == ""
}

func (t *Table) partitioned() bool { return t.TimePartitioning != nil || t.RangePartitioning != nil }

// timeLayout is the layout of the partition ids of a time unit.
func timeLayout(unit bigquery.TimePartitioningType) string {
	switch unit {
	case bigquery.HourPartitioningType:
		return "2006010215"
	case bigquery.MonthPartitioningType:
		return "200601"
	case bigquery.YearPartitioningType:
		return "2006"
	}
	return "20060102"
}

// partitionOf is the id of the partition of a row of t. The row's
// ingestion partition is used for a table partitioned by ingestion time.
func (t *Table) partitionOf(row []bigquery.Value, ingestion string) string {
	if tp := t.TimePartitioning; tp != nil {
		if tp.Field == "" {
			return ingestion
		}
		var at time.Time
		switch v := row[columnIndex(t.Schema, tp.Field)].(type) {
		case nil:
			return NullPartition
		case civil.Date:
			at = v.In(time.UTC)
		case civil.DateTime:
			at = v.In(time.UTC)
		case time.Time:
			at = v.UTC()
		default:
			return UnpartitionedPartition
		}
		return at.Format(timeLayout(tp.Type))
	}
	if rp := t.RangePartitioning; rp != nil {
		v, ok := row[columnIndex(t.Schema, rp.Field)].(int64)
		if !ok {
			return NullPartition
		}
		r := rp.Range
		if v < r.Start || v >= r.End {
			return UnpartitionedPartition
		}
		return strconv.FormatInt(r.Start+(v-r.Start)/r.Interval*r.Interval, 10)
	}
	return ""
}

// splitDecorator splits a table resource name at its partition decorator
// (…/tables/t$20261203): the table and the partition id, "" for none.
func splitDecorator(res string) (table, partition string) {
	i := strings.LastIndexByte(res, '/')
	if j := strings.IndexByte(res[i+1:], '$'); j >= 0 {
		return res[:i+1+j], res[i+1+j+1:]
	}
	return res, ""
}

// checkDecorator checks a partition id named by a decorator on t (its
// display name for messages), as the service does: the table must be
// partitioned and the id one of its partitions.
func (t *Table) checkDecorator(name, id string) error {
	switch {
	case !t.partitioned():
		return fmt.Errorf("Cannot read partition information from a table that is not partitioned: %s$%s", name, id)
	case id == NullPartition || id == UnpartitionedPartition:
		if t.ingestionTime() {
			return fmt.Errorf("Invalid partition decorator %s for table %s partitioned by ingestion time", id, name)
		}
		return nil
	case t.TimePartitioning != nil:
		layout := timeLayout(t.TimePartitioning.Type)
		if _, err := time.Parse(layout, id); err != nil || len(id) != len(layout) {
			return fmt.Errorf("Invalid partition decorator %s for table %s partitioned by %s: want %d digits", id, name, t.timeUnit(), len(layout))
		}
	default:
		r := t.RangePartitioning.Range
		v, err := strconv.ParseInt(id, 10, 64)
		if err != nil || v < r.Start || v >= r.End || (v-r.Start)%r.Interval != 0 {
			return fmt.Errorf("Invalid partition decorator %s for table %s: not the start of a partition of the range [%d, %d) by %d", id, name, r.Start, r.End, r.Interval)
		}
	}
	return nil
}

func (t *Table) timeUnit() bigquery.TimePartitioningType {
	if t.TimePartitioning.Type == "" {
		return bigquery.DayPartitioningType
	}
	return t.TimePartitioning.Type
}

// nowPartition is the partition id of the current time in a table
// partitioned by ingestion time.
func (t *Table) nowPartition() string {
	return time.Now().UTC().Format(timeLayout(t.TimePartitioning.Type))
}

// PartitionRows returns the rows readers see in one partition of a
// partitioned table: for a table partitioned by ingestion time, the rows
// that arrived in it (the partition of the time they became visible, or
// the one a partition decorator named); for a column or an integer range,
// the rows whose value falls in it (NullPartition, UnpartitionedPartition
// for the others).
func (s *Server) PartitionRows(name, id string) ([][]bigquery.Value, error) {
	t, err := s.tableNamed(name)
	if err != nil {
		return nil, err
	}
	if !t.partitioned() {
		return nil, fmt.Errorf("bqtest: table %s is not partitioned", t.name)
	}
	var out [][]bigquery.Value
	for i, row := range t.Rows {
		ing := ""
		if i < len(t.parts) {
			ing = t.parts[i]
		}
		if t.partitionOf(row, ing) == id {
			out = append(out, row)
		}
	}
	return out, nil
}

// tableMetaFromREST takes the metadata of a tables.insert body into t.
func tableMetaFromREST(in *bq.Table, t *Table) {
	if p := in.TimePartitioning; p != nil {
		t.TimePartitioning = &bigquery.TimePartitioning{Type: bigquery.TimePartitioningType(p.Type), Field: p.Field,
			Expiration: time.Duration(p.ExpirationMs) * time.Millisecond, RequirePartitionFilter: p.RequirePartitionFilter}
		if t.TimePartitioning.Type == "" {
			t.TimePartitioning.Type = bigquery.DayPartitioningType
		}
	}
	if p := in.RangePartitioning; p != nil {
		t.RangePartitioning = &bigquery.RangePartitioning{Field: p.Field}
		if r := p.Range; r != nil {
			t.RangePartitioning.Range = &bigquery.RangePartitioningRange{Start: r.Start, End: r.End, Interval: r.Interval}
		}
	}
	if in.Clustering != nil {
		t.Clustering = &bigquery.Clustering{Fields: in.Clustering.Fields}
	}
	t.Description, t.Labels = in.Description, in.Labels
	if in.EncryptionConfiguration != nil {
		t.KMSKey = in.EncryptionConfiguration.KmsKeyName
	}
	primaryKeyFromREST(in, t)
}

// restTableMeta adds t's metadata to a tables.get answer.
func restTableMeta(out map[string]any, t *Table) {
	if p := t.TimePartitioning; p != nil {
		out["timePartitioning"] = &bq.TimePartitioning{Type: string(t.timeUnit()), Field: p.Field,
			ExpirationMs: p.Expiration.Milliseconds(), RequirePartitionFilter: p.RequirePartitionFilter}
	}
	if p := t.RangePartitioning; p != nil {
		rp := &bq.RangePartitioning{Field: p.Field}
		if r := p.Range; r != nil {
			rp.Range = &bq.RangePartitioningRange{Start: r.Start, End: r.End, Interval: r.Interval}
		}
		out["rangePartitioning"] = rp
	}
	if t.Clustering != nil {
		out["clustering"] = &bq.Clustering{Fields: t.Clustering.Fields}
	}
	if t.Description != "" {
		out["description"] = t.Description
	}
	if len(t.Labels) > 0 {
		out["labels"] = t.Labels
	}
	if t.KMSKey != "" {
		out["encryptionConfiguration"] = &bq.EncryptionConfiguration{KmsKeyName: t.KMSKey}
	}
	restPrimaryKey(out, t)
}

// checkSchemaUpdate refuses a new schema of a table that the service
// refuses: every column kept, in its place, with its type; a mode changed
// only from REQUIRED to NULLABLE; columns added only at the end and not
// REQUIRED. bqtest adds columns at the top level only.
func checkSchemaUpdate(old, schema bigquery.Schema, prefix string) error {
	if len(schema) < len(old) {
		return fmt.Errorf("Field %s%s is missing in new schema", prefix, old[len(schema)].Name)
	}
	for i, o := range old {
		n := schema[i]
		path := prefix + o.Name
		switch {
		case !strings.EqualFold(o.Name, n.Name):
			return fmt.Errorf("Field %s is missing in new schema (found %s%s in its place)", path, prefix, n.Name)
		case o.Type != n.Type:
			return fmt.Errorf("Field %s has changed type from %s to %s", path, o.Type, n.Type)
		case o.Repeated != n.Repeated || (!o.Required && n.Required):
			return fmt.Errorf("Field %s has changed mode from %s to %s", path, bqMode(o), bqMode(n))
		}
		if o.Type == bigquery.RecordFieldType {
			if len(n.Schema) != len(o.Schema) {
				if err := checkSchemaUpdate(o.Schema, n.Schema, path+"."); err != nil {
					return err
				}
				return fmt.Errorf("bqtest adds columns at the top level only, not in RECORD %s", path)
			}
			if err := checkSchemaUpdate(o.Schema, n.Schema, path+"."); err != nil {
				return err
			}
		}
	}
	for _, n := range schema[len(old):] {
		if n.Required {
			return fmt.Errorf("Cannot add required fields to an existing schema. (field: %s%s)", prefix, n.Name)
		}
	}
	return nil
}

// updateSchemaLocked gives the table t a new schema (checked), as a new
// version whose rows have NULLs in the added columns.
func (s *Server) updateSchemaLocked(t *table, schema bigquery.Schema) *table {
	rows := make([][]bigquery.Value, len(t.Rows))
	for i, r := range t.Rows {
		rows[i] = append(append(make([]bigquery.Value, 0, len(schema)), r...), make([]bigquery.Value, len(schema)-len(r))...)
	}
	nt := &table{name: t.name, Table: t.Table, rowBytes: t.rowBytes, expires: t.expires, origin: t.lineage(),
		parts: append([]string(nil), t.parts...)}
	nt.Schema, nt.Rows = schema, rows
	s.tables[t.name] = nt
	return nt
}
