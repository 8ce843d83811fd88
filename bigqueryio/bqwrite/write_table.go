package bqwrite

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
)

// PartitionUnit is the span of time of one partition of a table
// partitioned by time.
type PartitionUnit string

// The units of time partitioning, as BigQuery names them.
const (
	PartitionByDay   PartitionUnit = "DAY"
	PartitionByHour  PartitionUnit = "HOUR"
	PartitionByMonth PartitionUnit = "MONTH"
	PartitionByYear  PartitionUnit = "YEAR"
)

// TimePartitioning partitions a table by time (Java's withTimePartitioning).
type TimePartitioning struct {
	// Unit is the span of a partition: PartitionByDay, PartitionByHour,
	// PartitionByMonth or PartitionByYear.
	Unit PartitionUnit
	// Column is the DATE, DATETIME or TIMESTAMP column whose value puts a
	// row in its partition (a DATE column not by hour); "" partitions by
	// the time rows are written (ingestion time, _PARTITIONTIME).
	Column string
	// Expiration is how long a partition is kept after its end; 0: for
	// ever.
	Expiration time.Duration
}

// String is p as Go text, for messages.
func (p TimePartitioning) String() string {
	return fmt.Sprintf("{Unit:%s Column:%s Expiration:%v}", p.Unit, p.Column, p.Expiration)
}

// RangePartitioning partitions a table by an INTEGER column: the values
// [Start, End) in partitions of Interval values each; a value outside
// them, or NULL, goes to a partition of its own.
type RangePartitioning struct {
	Column               string
	Start, End, Interval int64
}

// String is p as Go text, for messages.
func (p RangePartitioning) String() string {
	return fmt.Sprintf("{Column:%s Start:%d End:%d Interval:%d}", p.Column, p.Start, p.End, p.Interval)
}

// TableSpec is how CreateIfNeeded makes a table: partitioned by time or by
// an integer range (one at most), clustered by up to four columns, with a
// description, labels and a Cloud KMS key
// (projects/p/locations/l/keyRings/r/cryptoKeys/k) to encrypt it. The
// schema is WithSchema's or the one inferred from the element type. A
// table that exists is written as it is: its spec is not checked.
type TableSpec struct {
	TimePartitioning  *TimePartitioning
	RangePartitioning *RangePartitioning
	Clustering        []string
	Description       string
	Labels            map[string]string
	KMSKey            string
	// PrimaryKey is the table's primary key (NOT ENFORCED), which CDC
	// changes (WithRowMutation) are applied by: 1 to 16 top-level columns,
	// neither REPEATED nor RECORD.
	PrimaryKey []string
}

// specOption names the options that set a TableSpec's fields, for
// messages.
var specOption = map[string]string{
	"TimePartitioning": "WithTimePartitioning", "RangePartitioning": "WithRangePartitioning",
	"Clustering": "WithClustering", "Description": "WithTableDescription", "Labels": "WithTableLabels", "KMSKey": "WithKMSKey",
	"PrimaryKey": "WithPrimaryKey",
}

// stringArgs is ss as arguments of note.
func stringArgs(ss []string) []any {
	args := make([]any, len(ss))
	for i, s := range ss {
		args[i] = s
	}
	return args
}

var (
	labelKey   = regexp.MustCompile(`^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$`)
	labelValue = regexp.MustCompile(`^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$`)
	kmsKey     = regexp.MustCompile(`^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$`)
)

// given reports whether the spec sets anything.
func (sp *TableSpec) given() bool {
	return sp.TimePartitioning != nil || sp.RangePartitioning != nil || len(sp.Clustering) > 0 ||
		sp.Description != "" || len(sp.Labels) > 0 || sp.KMSKey != "" || len(sp.PrimaryKey) > 0
}

// check refuses a spec that the service would refuse for schema. name
// names the option of a field (TimePartitioning, ...) in messages.
func (sp *TableSpec) check(schema bigquery.Schema, name func(field string) string) error {
	if sp.TimePartitioning != nil && sp.RangePartitioning != nil {
		return fmt.Errorf("%s and %s: a table is partitioned by time or by a range, not both", name("TimePartitioning"), name("RangePartitioning"))
	}
	if tp := sp.TimePartitioning; tp != nil {
		switch tp.Unit {
		case PartitionByDay, PartitionByHour, PartitionByMonth, PartitionByYear:
		default:
			return fmt.Errorf("%s: unit %q: want PartitionByDay, PartitionByHour, PartitionByMonth or PartitionByYear", name("TimePartitioning"), tp.Unit)
		}
		if tp.Expiration < 0 {
			return fmt.Errorf("%s: a negative expiration", name("TimePartitioning"))
		}
		if tp.Column != "" {
			f, err := partitionColumn(schema, tp.Column, name("TimePartitioning"))
			if err != nil {
				return err
			}
			switch {
			case f.Type != bigquery.DateFieldType && f.Type != bigquery.DateTimeFieldType && f.Type != bigquery.TimestampFieldType:
				return fmt.Errorf("%s: column %s is %s: a table is partitioned by time on a DATE, DATETIME or TIMESTAMP column", name("TimePartitioning"), f.Name, f.Type)
			case f.Type == bigquery.DateFieldType && tp.Unit == PartitionByHour:
				return fmt.Errorf("%s: column %s is a DATE, which is not partitioned by hour", name("TimePartitioning"), f.Name)
			}
		}
	}
	if rp := sp.RangePartitioning; rp != nil {
		f, err := partitionColumn(schema, rp.Column, name("RangePartitioning"))
		if err != nil {
			return err
		}
		switch {
		case f.Type != bigquery.IntegerFieldType:
			return fmt.Errorf("%s: column %s is %s: a range partitions an INTEGER column", name("RangePartitioning"), f.Name, f.Type)
		case rp.Interval <= 0 || rp.End <= rp.Start:
			return fmt.Errorf("%s: want Start < End and an Interval > 0", name("RangePartitioning"))
		case (rp.End-rp.Start)/rp.Interval >= 10000:
			return fmt.Errorf("%s: %d partitions, the service allows fewer than 10000", name("RangePartitioning"), (rp.End-rp.Start)/rp.Interval)
		}
	}
	if len(sp.Clustering) > 4 {
		return fmt.Errorf("%s: %d columns, a table is clustered by at most 4", name("Clustering"), len(sp.Clustering))
	}
	seen := map[string]bool{}
	for _, col := range sp.Clustering {
		f := topLevel(schema, col)
		switch {
		case f == nil:
			return fmt.Errorf("%s: column %q is not a top-level column of the schema (the columns are %s)", name("Clustering"), col, columnNames(schema))
		case seen[strings.ToLower(col)]:
			return fmt.Errorf("%s: column %s named twice", name("Clustering"), col)
		case f.Repeated || !clusterable(f.Type):
			return fmt.Errorf("%s: column %s is %s%s, which a table cannot be clustered by", name("Clustering"), col, repeatedText(f), f.Type)
		}
		seen[strings.ToLower(col)] = true
	}
	if len(sp.Labels) > 64 {
		return fmt.Errorf("%s: %d labels, a table has at most 64", name("Labels"), len(sp.Labels))
	}
	for k, v := range sp.Labels {
		if !labelKey.MatchString(k) || !labelValue.MatchString(v) {
			return fmt.Errorf("%s: label %q: %q: keys are 1 to 63 lowercase letters, digits, '_' or '-' starting with a letter, values at most 63 of them", name("Labels"), k, v)
		}
	}
	if sp.KMSKey != "" && !kmsKey.MatchString(sp.KMSKey) {
		return fmt.Errorf("%s: want projects/p/locations/l/keyRings/r/cryptoKeys/k", name("KMSKey"))
	}
	if sp.PrimaryKey != nil {
		return checkPrimaryKey(sp.PrimaryKey, schema, name("PrimaryKey"))
	}
	return nil
}

// partitionColumn is the top-level, non-repeated column a partitioning
// names.
func partitionColumn(schema bigquery.Schema, col, option string) (*bigquery.FieldSchema, error) {
	f := topLevel(schema, col)
	switch {
	case f == nil:
		return nil, fmt.Errorf("%s: column %q is not a top-level column of the schema (the columns are %s)", option, col, columnNames(schema))
	case f.Repeated:
		return nil, fmt.Errorf("%s: column %s is REPEATED, which does not partition a table", option, f.Name)
	}
	return f, nil
}

func repeatedText(f *bigquery.FieldSchema) string {
	if f.Repeated {
		return "REPEATED "
	}
	return ""
}

func topLevel(schema bigquery.Schema, name string) *bigquery.FieldSchema {
	for _, f := range schema {
		if strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

func clusterable(t bigquery.FieldType) bool {
	switch t {
	case bigquery.StringFieldType, bigquery.IntegerFieldType, bigquery.NumericFieldType, bigquery.BigNumericFieldType,
		bigquery.BooleanFieldType, bigquery.DateFieldType, bigquery.DateTimeFieldType, bigquery.TimestampFieldType,
		bigquery.GeographyFieldType:
		return true
	}
	return false
}

// describe is the table sp makes of schema, for the log: its columns
// (name, type, mode, RECORD fields) and what sp sets.
func (sp *TableSpec) describe(schema bigquery.Schema) string {
	var b strings.Builder
	b.WriteString("columns (")
	describeFields(&b, schema)
	b.WriteString(")")
	if tp := sp.TimePartitioning; tp != nil {
		fmt.Fprintf(&b, ", time partitioning %v", *tp)
	}
	if rp := sp.RangePartitioning; rp != nil {
		fmt.Fprintf(&b, ", range partitioning %v", *rp)
	}
	if len(sp.Clustering) > 0 {
		fmt.Fprintf(&b, ", clustering %s", strings.Join(sp.Clustering, ", "))
	}
	if len(sp.PrimaryKey) > 0 {
		fmt.Fprintf(&b, ", primary key (%s)", strings.Join(sp.PrimaryKey, ", "))
	}
	if sp.KMSKey != "" {
		fmt.Fprintf(&b, ", KMS key %s", sp.KMSKey)
	}
	if sp.Description != "" {
		fmt.Fprintf(&b, ", description %q", sp.Description)
	}
	if len(sp.Labels) > 0 {
		keys := slices.Sorted(maps.Keys(sp.Labels))
		b.WriteString(", labels ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%s=%s", k, sp.Labels[k])
		}
	}
	return b.String()
}

// describeFields writes the fields of schema as "name TYPE [MODE]", RECORD
// fields in parentheses.
func describeFields(b *strings.Builder, schema bigquery.Schema) {
	for i, f := range schema {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		b.WriteString(" ")
		b.WriteString(string(f.Type))
		switch {
		case f.Repeated:
			b.WriteString(" REPEATED")
		case f.Required:
			b.WriteString(" REQUIRED")
		}
		if f.Type == bigquery.RecordFieldType {
			b.WriteString(" (")
			describeFields(b, f.Schema)
			b.WriteString(")")
		}
	}
}

// metadata is the table's metadata for tables.insert.
func (sp *TableSpec) metadata(schema bigquery.Schema) (*bigquery.TableMetadata, error) {
	md := &bigquery.TableMetadata{Description: sp.Description, Labels: sp.Labels, Schema: schema}
	if tp := sp.TimePartitioning; tp != nil {
		unit := tp.Unit
		if unit == "" {
			unit = PartitionByDay
		}
		md.TimePartitioning = &bigquery.TimePartitioning{Type: bigquery.TimePartitioningType(unit), Field: tp.Column, Expiration: tp.Expiration}
	}
	if rp := sp.RangePartitioning; rp != nil {
		md.RangePartitioning = &bigquery.RangePartitioning{Field: rp.Column,
			Range: &bigquery.RangePartitioningRange{Start: rp.Start, End: rp.End, Interval: rp.Interval}}
	}
	if len(sp.Clustering) > 0 {
		md.Clustering = &bigquery.Clustering{Fields: sp.Clustering}
	}
	if sp.KMSKey != "" {
		md.EncryptionConfig = &bigquery.EncryptionConfig{KMSKeyName: sp.KMSKey}
	}
	if len(sp.PrimaryKey) > 0 {
		md.TableConstraints = &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: sp.PrimaryKey}}
	}
	return md, nil
}

// splitDecorator splits a table resource name (or a table id) at its
// partition decorator: table$20261203 is the table and the partition
// 20261203 ("" for none).
func splitDecorator(res string) (table, partition string) {
	if i := strings.IndexByte(res, '$'); i >= 0 {
		return res[:i], res[i+1:]
	}
	return res, ""
}

// checkDecorator refuses a partition decorator that names no partition
// of a table made by sp (a time unit's digits, or the start of a range),
// and one that names none of any table.
func (sp *TableSpec) checkDecorator(table, part string) error {
	if part == "__NULL__" || part == "__UNPARTITIONED__" {
		return nil
	}
	if tp := sp.TimePartitioning; tp != nil {
		layout := unitLayout(tp.Unit)
		if _, err := time.Parse(layout, part); err != nil || len(part) != len(layout) {
			return fmt.Errorf("table %q: partition %q is not a partition of a table partitioned by %s (%d digits, %s)", table, part, tp.Unit, len(layout), layout)
		}
		return nil
	}
	v, err := strconv.ParseInt(part, 10, 64)
	if rp := sp.RangePartitioning; rp != nil {
		if err != nil || v < rp.Start || v >= rp.End || (v-rp.Start)%rp.Interval != 0 {
			return fmt.Errorf("table %q: partition %q is not the start of a partition of the range [%d, %d) by %d", table, part, rp.Start, rp.End, rp.Interval)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("table %q: partition decorator %q: want a time partition's digits (yyyymmdd, yyyymmddhh, yyyymm, yyyy) or a range's start", table, part)
	}
	return nil
}

func unitLayout(u PartitionUnit) string {
	switch u {
	case PartitionByHour:
		return "2006010215"
	case PartitionByMonth:
		return "200601"
	case PartitionByYear:
		return "2006"
	}
	return "20060102"
}

// checkSpecFunc checks WithTableSpecFunc's function: a func(string)
// TableSpec, given with WithTableFunc and no fixed spec.
func (c *writeConfig) checkSpecFunc() error {
	if c.specFn == nil {
		return nil
	}
	ft := reflect.TypeOf(c.specFn)
	last := c.calls("WithTableSpecFunc")
	switch {
	case ft == nil || ft.Kind() != reflect.Func || ft.NumIn() != 1 || ft.NumOut() != 1 || ft.In(0) != reflect.TypeFor[string]() || ft.Out(0) != reflect.TypeFor[TableSpec]():
		return fmt.Errorf("%s: want a func(string) bqwrite.TableSpec", last[len(last)-1])
	case c.tableFn == nil:
		return fmt.Errorf("%s is given without WithTableFunc; for one table, give the spec's options (WithTimePartitioning, ...)", last[len(last)-1])
	case c.Spec.given():
		return fmt.Errorf("%s cannot be given with the options of a fixed spec (WithTimePartitioning, WithClustering, ...)", last[len(last)-1])
	}
	return nil
}

// specCalls lists the calls of the spec's options, for messages.
func (c *writeConfig) specCalls() string {
	options := slices.Collect(maps.Values(specOption))
	var out []string
	for _, g := range c.given {
		if g.Name == "WithTableSpecFunc" || slices.Contains(options, g.Name) {
			out = append(out, g.Call)
		}
	}
	return strings.Join(out, ", ")
}

// specName names, for messages, the option that set a field of the spec.
func (c *writeConfig) specName(field string) string {
	calls := c.calls(specOption[field])
	if len(calls) == 0 {
		return specOption[field]
	}
	return calls[len(calls)-1]
}
