package bqwrite

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// CDC (change data capture) writes: each element is a change to the row
// of the table with the same primary key, an upsert or a delete, that
// BigQuery applies itself. The rows carry two pseudo-columns besides the
// table's, _CHANGE_TYPE and _CHANGE_SEQUENCE_NUMBER; the service takes
// them only on a table's _default stream, of a table with a primary key.

// ChangeType is what a CDC change does to the row with its primary key.
type ChangeType int

const (
	// Upsert inserts the row, or replaces the row with the same primary
	// key.
	Upsert ChangeType = 1
	// Delete deletes the row with the same primary key (the element's
	// other columns are not used).
	Delete ChangeType = 2
)

// String is the change type as the _CHANGE_TYPE pseudo-column holds it.
func (c ChangeType) String() string {
	switch c {
	case Upsert:
		return "UPSERT"
	case Delete:
		return "DELETE"
	}
	return fmt.Sprintf("ChangeType(%d)", int(c))
}

// RowMutation is the change an element of a WithRowMutation write makes
// (Beam Java's RowMutationInformation).
type RowMutation struct {
	Type ChangeType
	// SequenceNumber orders the changes of one primary key (the
	// _CHANGE_SEQUENCE_NUMBER pseudo-column): one to four sections of 1 to
	// 16 hexadecimal digits, separated by '/' ("1A", "FFF/0"; see
	// SequenceNumber). The service compares sections left to right as
	// unsigned numbers; a change whose number is below the one the key's
	// row was last changed by is ignored; between equal numbers, the one
	// written last wins. A change without one ("") is refused, unless the
	// write is given WithUnorderedChanges: the changes of a key are then
	// applied in the order they arrive, which a retried append or appends
	// multiplexed on one connection can upset, applying an older upsert
	// after a newer one (see docs/BIGQUERY.md, "Change data capture").
	SequenceNumber string
}

// SequenceNumber formats a change sequence number of one to four sections
// (RowMutation.SequenceNumber): SequenceNumber(3, 255) is "3/FF". It
// panics with no section or more than four.
func SequenceNumber(sections ...uint64) string {
	if len(sections) == 0 || len(sections) > 4 {
		panic(fmt.Sprintf("bqwrite.SequenceNumber: %d sections, want 1 to 4", len(sections)))
	}
	parts := make([]string, len(sections))
	for i, s := range sections {
		parts[i] = fmt.Sprintf("%X", s)
	}
	return strings.Join(parts, "/")
}

// sequencePattern is what the service takes as a _CHANGE_SEQUENCE_NUMBER.
var sequencePattern = regexp.MustCompile(`^[0-9A-Fa-f]{1,16}(/[0-9A-Fa-f]{1,16}){0,3}$`)

// maxPrimaryKey is the most columns of a primary key the service takes.
const maxPrimaryKey = 16

// The proto field numbers of the pseudo-columns in the writer schema:
// past any column's (a table has at most 10,000 columns, numbered from 1),
// so that columns added to the table later never take them.
const (
	changeTypeField     protowire.Number = 20001
	changeSequenceField protowire.Number = 20002
)

// checkCDC checks WithRowMutation against the other options, the element
// type t and the schema rows are written with (nil for Rows that take the
// table's): what the service would refuse is refused now, naming the
// option. (TableSpec.check checks WithPrimaryKey's columns.)
func (c *writeConfig) checkCDC(t reflect.Type, schema bigquery.Schema) error {
	if c.mutationFn == nil {
		if c.Unordered {
			return fmt.Errorf("%s applies to the changes of WithRowMutation, which is not given", c.calls("WithUnorderedChanges")[0])
		}
		return nil
	}
	calls := c.calls("WithRowMutation")
	call := calls[len(calls)-1]
	ft := reflect.TypeOf(c.mutationFn)
	switch {
	case ft == nil || ft.Kind() != reflect.Func || ft.NumIn() != 1 || ft.NumOut() != 1 || ft.In(0) != t || ft.Out(0) != reflect.TypeFor[RowMutation]():
		return fmt.Errorf("%s: want a func(%v) bqwrite.RowMutation", call, t)
	case !c.AtLeastOnce:
		return fmt.Errorf("%s needs WithAtLeastOnce: the service takes CDC changes only on a table's _default stream, which has no exactly-once mode (upserts by key are idempotent, and sequence numbers order them)", call)
	case c.Create == CreateIfNeeded && c.specFn == nil && len(c.Spec.PrimaryKey) == 0:
		return fmt.Errorf("%s: the table CreateIfNeeded would create has no primary key, which CDC changes are applied by: give WithPrimaryKey, or WithCreateDisposition(CreateNever) for a table that has one", call)
	}
	for _, f := range schema {
		if pseudoColumn(f.Name) {
			return fmt.Errorf("%s: the schema has a column %s, a name the service keeps for CDC's pseudo-columns", call, f.Name)
		}
	}
	return nil
}

// pseudoColumn reports the names of CDC's pseudo-columns.
func pseudoColumn(name string) bool {
	return strings.EqualFold(name, "_CHANGE_TYPE") || strings.EqualFold(name, "_CHANGE_SEQUENCE_NUMBER")
}

// checkPrimaryKey refuses a primary key the service refuses for schema;
// option names where it was given.
func checkPrimaryKey(cols []string, schema bigquery.Schema, option string) error {
	if len(cols) == 0 || len(cols) > maxPrimaryKey {
		return fmt.Errorf("%s: %d columns, a primary key has 1 to %d", option, len(cols), maxPrimaryKey)
	}
	seen := map[string]bool{}
	for _, col := range cols {
		f := topLevel(schema, col)
		switch {
		case f == nil:
			return fmt.Errorf("%s: column %q is not a top-level column of the schema (the columns are %s)", option, col, columnNames(schema))
		case seen[strings.ToLower(col)]:
			return fmt.Errorf("%s: column %s named twice", option, col)
		case f.Repeated || f.Type == bigquery.RecordFieldType:
			return fmt.Errorf("%s: column %s is %s%s, which a primary key cannot hold", option, col, repeatedText(f), f.Type)
		}
		seen[strings.ToLower(col)] = true
	}
	return nil
}

// changeColumns returns desc with the CDC pseudo-columns added, as
// strings.
func changeColumns(desc *descriptorpb.DescriptorProto) *descriptorpb.DescriptorProto {
	d := proto.Clone(desc).(*descriptorpb.DescriptorProto)
	for _, f := range []struct {
		name string
		num  protowire.Number
	}{{"_CHANGE_TYPE", changeTypeField}, {"_CHANGE_SEQUENCE_NUMBER", changeSequenceField}} {
		d.Field = append(d.Field, &descriptorpb.FieldDescriptorProto{
			Name:   proto.String(f.name),
			Number: proto.Int32(int32(f.num)),
			Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:   descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
		})
	}
	return d
}

// changeDesc is the writer schema rows of enc are sent with: enc's, with
// the pseudo-columns of a WithRowMutation write.
func (f *appendFn) changeDesc(enc *rowEncoder) {
	if f.Mutation != nil {
		enc.desc = changeColumns(enc.desc)
	}
}

// errNoPrimaryKey refuses to create a table for CDC changes without a
// primary key (WithTableSpecFunc's spec of the table has none).
var errNoPrimaryKey = errors.New("WithTableSpecFunc gives the table no TableSpec.PrimaryKey, which WithRowMutation's changes are applied by: the table is not created")

// errReapply stands for the answer of a CDC append written after one that
// failed: it is sent again after the failed one, so that the changes of a
// key are applied in the order they were appended, even without sequence
// numbers.
var errReapply = errors.New("bigqueryio: a CDC append after a failed one, to apply again after it")

// mutationFunc is the caller of WithRowMutation's function; unordered is
// WithUnorderedChanges.
type mutationFunc struct {
	fn        reflectx.Func1x1
	unordered bool
}

func newMutationFunc(f *beam.EncodedFunc, unordered bool) *mutationFunc {
	if f == nil {
		return nil
	}
	return &mutationFunc{fn: reflectx.ToFunc1x1(f.Fn), unordered: unordered}
}

// errNoSequence refuses a change without a sequence number.
var errNoSequence = errors.New("WithRowMutation: the change has no sequence number (RowMutation.SequenceNumber), so a retried or multiplexed append could apply an older change of its key after a newer one: give each change one (bqwrite.SequenceNumber), or WithUnorderedChanges() to apply changes in the order they arrive")

// appendChange appends the pseudo-columns of x's change to its encoded
// row, or says why the service would refuse them.
func (m *mutationFunc) appendChange(row []byte, x any) ([]byte, error) {
	rm := m.fn.Call1x1(x).(RowMutation)
	if rm.Type != Upsert && rm.Type != Delete {
		return row, fmt.Errorf("WithRowMutation: change type %v: want bqwrite.Upsert or bqwrite.Delete", rm.Type)
	}
	row = protowire.AppendTag(row, changeTypeField, protowire.BytesType)
	row = protowire.AppendString(row, rm.Type.String())
	if rm.SequenceNumber == "" {
		if !m.unordered {
			return row, errNoSequence
		}
		return row, nil
	}
	if !sequencePattern.MatchString(rm.SequenceNumber) {
		return row, fmt.Errorf("WithRowMutation: sequence number %q: want 1 to 4 sections of 1 to 16 hexadecimal digits separated by '/' (bqwrite.SequenceNumber makes one)", rm.SequenceNumber)
	}
	row = protowire.AppendTag(row, changeSequenceField, protowire.BytesType)
	return protowire.AppendString(row, rm.SequenceNumber), nil
}

// checkPrimaryKeyOf refuses, when a WithRowMutation write meets table res,
// a table without a primary key (tables.get's tableConstraints), which
// the service applies CDC changes by: the table was not made by this
// write (CreateNever, or it existed), so nothing checked it before.
func (cfg writeConfig) checkPrimaryKeyOf(ctx context.Context, res string) error {
	c, err := cfg.rest(ctx, projectOf(res))
	if err != nil {
		return err
	}
	defer c.Close()
	t, err := c.Table(res).Metadata(ctx)
	if err != nil {
		return fmt.Errorf("reading the table's primary key (WithRowMutation): %w", err)
	}
	if tc := t.TableConstraints; tc == nil || tc.PrimaryKey == nil || len(tc.PrimaryKey.Columns) == 0 {
		return errors.New("the table has no primary key (tables.get shows no tableConstraints.primaryKey), which WithRowMutation's changes are applied by: the service would refuse every change; give the table one (ALTER TABLE ... ADD PRIMARY KEY (...) NOT ENFORCED)")
	}
	return nil
}
