package bqtest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/civil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	_ "google.golang.org/protobuf/types/known/timestamppb" // registers google/protobuf/timestamp.proto
	_ "google.golang.org/protobuf/types/known/wrapperspb"  // registers google/protobuf/wrappers.proto
)

// writerSchema is the writer schema of an AppendRows connection: the
// message its rows are serialized as, read with proto2 semantics as the
// service reads them, and its plans for the tables it was used on.
type writerSchema struct {
	md    protoreflect.MessageDescriptor
	mu    sync.Mutex             // guards plans: connections share a writer schema
	plans map[planKey]planResult // by table lineage and schema
}

// maxWriterSchemas bounds the server's cache of compiled writer schemas.
const maxWriterSchemas = 1024

// writerSchemaFor returns the compiled writer schema of d, from the
// server's cache when a connection sent the same descriptor before (a
// multiplexing client sends it on every change of table).
func (s *Server) writerSchemaFor(d *descriptorpb.DescriptorProto) (*writerSchema, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(d)
	if err != nil {
		return nil, err
	}
	key := string(b)
	s.mu.Lock()
	ws := s.w.schemas[key]
	s.mu.Unlock()
	if ws != nil {
		return ws, nil
	}
	if ws, err = newWriterSchema(d); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.w.schemas == nil || len(s.w.schemas) >= maxWriterSchemas {
		s.w.schemas = map[string]*writerSchema{}
	}
	s.w.schemas[key] = ws
	s.mu.Unlock()
	return ws, nil
}

type planResult struct {
	p  *rowPlan
	st *status.Status
}

// newWriterSchema builds the message of a writer schema's DescriptorProto,
// as adapt.NormalizeDescriptor makes it: a self-contained message whose
// nested types are referred to by relative names. Well-known types may
// also be referred to by their full names.
func newWriterSchema(d *descriptorpb.DescriptorProto) (*writerSchema, error) {
	if d.GetName() == "" {
		return nil, fmt.Errorf("the descriptor has no name")
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:        proto.String("bqtest_writer_schema.proto"),
		Syntax:      proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{d},
		Dependency:  []string{"google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		return nil, err
	}
	if err := checkPacked(d); err != nil {
		return nil, err
	}
	return &writerSchema{md: fd.Messages().Get(0)}, nil
}

// checkPacked refuses the packed option on a field that is not a repeated
// scalar number, as the service's descriptor builder (protobuf's C++)
// does; Go's protodesc accepts it.
func checkPacked(d *descriptorpb.DescriptorProto) error {
	for _, f := range d.GetField() {
		if !f.GetOptions().GetPacked() {
			continue
		}
		switch {
		case f.GetLabel() != descriptorpb.FieldDescriptorProto_LABEL_REPEATED,
			f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_STRING, f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_BYTES,
			f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_GROUP:
			return fmt.Errorf("field %s.%s: [packed = true] can only be specified for repeated primitive fields", d.GetName(), f.GetName())
		}
	}
	for _, n := range d.GetNestedType() {
		if err := checkPacked(n); err != nil {
			return err
		}
	}
	return nil
}

// plan returns the plan that converts the rows of ws into rows of t, or the
// status the service refuses the writer schema with.
func (ws *writerSchema) plan(t *table, stream string) (*rowPlan, *status.Status) {
	// A table's plans hold until its schema changes (tables.patch, a copy
	// job): a new schema has new fields.
	key := planKey{t.lineage(), t.Schema[0]}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if r, ok := ws.plans[key]; ok {
		return r.p, r.st
	}
	p, err := compilePlan(ws.md, t.Schema, "")
	var st *status.Status
	if err != nil {
		if extra, ok := err.(extraFieldsError); ok {
			msg := fmt.Sprintf("Input schema has more fields than BigQuery schema, extra fields: '%s' Entity: %s", strings.Join(extra, ","), stream)
			st = storageStatus(codes.InvalidArgument, storagepb.StorageError_SCHEMA_MISMATCH_EXTRA_FIELDS, stream, msg)
		} else {
			st = status.New(codes.InvalidArgument, err.Error()+" Entity: "+stream)
		}
		p = nil
	}
	if ws.plans == nil {
		ws.plans = map[planKey]planResult{}
	}
	ws.plans[key] = planResult{p, st}
	return p, st
}

// planKey is a table (its lineage) with a schema (its first field, new
// in every new schema).
type planKey struct {
	table *table
	first *bigquery.FieldSchema
}

// extraFieldsError names the fields of a writer schema that the table does
// not have.
type extraFieldsError []string

func (e extraFieldsError) Error() string { return "extra fields: " + strings.Join(e, ",") }

// rowPlan converts messages of one type into rows of one (record) schema.
type rowPlan struct {
	md     protoreflect.MessageDescriptor
	schema bigquery.Schema
	cols   []colPlan  // one per column, in schema order
	cdc    *cdcFields // CDC's pseudo-columns, in a table's plan (cdc.go)
}

// colPlan converts one column.
type colPlan struct {
	f     *bigquery.FieldSchema
	path  string
	fd    protoreflect.FieldDescriptor // the message's field for it; nil if it has none (NULL)
	inner protoreflect.FieldDescriptor // a wrapper message's value field
	ts    bool                         // fd is a google.protobuf.Timestamp
	conv  convFunc                     // converts a scalar value (of fd, or inner)
	sub   *rowPlan                     // a RECORD's plan
}

type convFunc func(v protoreflect.Value) (bigquery.Value, error)

func compilePlan(md protoreflect.MessageDescriptor, schema bigquery.Schema, prefix string) (*rowPlan, error) {
	p := &rowPlan{md: md, schema: schema, cols: make([]colPlan, len(schema))}
	byName := map[string]int{}
	for i, f := range schema {
		byName[strings.ToLower(f.Name)] = i
		p.cols[i] = colPlan{f: f, path: prefix + f.Name}
	}
	var extra extraFieldsError
	var subErr error
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		col := columnName(fd)
		ci, ok := byName[strings.ToLower(col)]
		if !ok && prefix == "" {
			if taken, err := p.takeChangeField(fd); taken {
				if err != nil && subErr == nil {
					subErr = err
				}
				continue
			}
		}
		if !ok {
			extra = append(extra, prefix+col)
			continue
		}
		c := &p.cols[ci]
		if c.fd != nil {
			return nil, fmt.Errorf("The proto fields %s and %s both name the BigQuery field %s.", c.fd.Name(), fd.Name(), c.path)
		}
		c.fd = fd
		if err := c.compile(); err != nil {
			if e, ok := err.(extraFieldsError); ok {
				extra = append(extra, e...)
				continue
			}
			if subErr == nil {
				subErr = err
			}
		}
	}
	if len(extra) > 0 {
		return nil, extra
	}
	if subErr != nil {
		return nil, subErr
	}
	return p, nil
}

// columnName is the column a field writes: its name, or the one its
// google.cloud.bigquery.storage.v1.column_name option gives.
func columnName(fd protoreflect.FieldDescriptor) string {
	if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts != nil && proto.HasExtension(opts, storagepb.E_ColumnName) {
		if n, _ := proto.GetExtension(opts, storagepb.E_ColumnName).(string); n != "" {
			return n
		}
	}
	return string(fd.Name())
}

func bqMode(f *bigquery.FieldSchema) string {
	switch {
	case f.Repeated:
		return "REPEATED"
	case f.Required:
		return "REQUIRED"
	}
	return "NULLABLE"
}

func (c *colPlan) compile() error {
	fd, f := c.fd, c.f
	mismatch := func() error {
		t := fd.Kind().String()
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
			t = "message " + string(fd.Message().FullName())
		}
		return fmt.Errorf("The proto field mismatched with BigQuery field at %s, the proto field type %s, BigQuery field type %s.", c.path, t, f.Type)
	}
	if fd.IsMap() {
		return fmt.Errorf("The proto field %s is a map, which bqtest does not serve (BigQuery field %s).", fd.Name(), c.path)
	}
	if (fd.Cardinality() == protoreflect.Repeated) != f.Repeated {
		return fmt.Errorf("The proto field mismatched with BigQuery field at %s, the proto field label %s, BigQuery field mode %s.", c.path, fd.Cardinality(), bqMode(f))
	}
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		m := fd.Message()
		if f.Type == bigquery.RecordFieldType {
			sub, err := compilePlan(m, f.Schema, c.path+".")
			if err != nil {
				return err
			}
			c.sub = sub
			return nil
		}
		switch wkt := wellKnown(m); {
		case wkt == "Timestamp" && f.Type == bigquery.TimestampFieldType:
			if m.Fields().ByName("seconds") == nil || m.Fields().ByName("nanos") == nil {
				return mismatch()
			}
			c.ts = true
			return nil
		case strings.HasSuffix(wkt, "Value") && m.Fields().Len() == 1 && m.Fields().Get(0).Name() == "value":
			c.inner = m.Fields().Get(0)
			if c.conv = scalarConv(f, c.path, c.inner.Kind(), c.inner); c.conv == nil {
				return mismatch()
			}
			return nil
		}
		return mismatch()
	}
	if f.Type == bigquery.RecordFieldType {
		return mismatch()
	}
	if c.conv = scalarConv(f, c.path, fd.Kind(), fd); c.conv == nil {
		return mismatch()
	}
	return nil
}

// wellKnown returns the name of a google.protobuf well-known message type
// (Timestamp, Int64Value, ...), by its full name or the name
// adapt.NormalizeDescriptor gives its copy (google_protobuf_Int64Value);
// "" for any other message.
func wellKnown(m protoreflect.MessageDescriptor) string {
	if n, ok := strings.CutPrefix(string(m.FullName()), "google.protobuf."); ok {
		return n
	}
	if n, ok := strings.CutPrefix(string(m.Name()), "google_protobuf_"); ok {
		return n
	}
	return ""
}

// decode converts serialized rows. If any row breaks the table's schema it
// returns no rows and an error for each row that does.
func (p *rowPlan) decode(rows [][]byte) ([][]bigquery.Value, []*storagepb.RowError) {
	msg := dynamicpb.NewMessage(p.md)
	out := make([][]bigquery.Value, 0, len(rows))
	var errs []*storagepb.RowError
	for i, b := range rows {
		row, err := p.decodeRow(msg, b, i == 0)
		if err != nil {
			errs = append(errs, &storagepb.RowError{Index: int64(i), Code: storagepb.RowError_FIELDS_ERROR, Message: err.Error()})
			continue
		}
		if errs == nil {
			out = append(out, row)
		}
	}
	if errs != nil {
		return nil, errs
	}
	return out, nil
}

// decodeRow decodes one row; with check, it also checks the row against
// the schema as AddTable checks rows (a safety net: what the read side
// serves must hold the values it expects; decode checks the first row of
// each request, which catches a conversion that is wrong for a column).
func (p *rowPlan) decodeRow(msg *dynamicpb.Message, b []byte, check bool) ([]bigquery.Value, error) {
	if err := proto.Unmarshal(b, msg); err != nil {
		return nil, fmt.Errorf("Could not parse the serialized row as %s: %v.", p.md.FullName(), err)
	}
	row, err := p.row(msg.ProtoReflect(), "")
	if err != nil {
		return nil, err
	}
	if !check {
		return row, nil
	}
	if err := checkRow(p.schema, row, nil); err != nil {
		return nil, fmt.Errorf("bqtest: internal error converting a row: %v", err)
	}
	return row, nil
}

// unknownFields reports fields of m that its writer schema does not
// declare.
func unknownFields(m protoreflect.Message, where string) error {
	u := m.GetUnknown()
	if len(u) == 0 {
		return nil
	}
	num, _, _ := protowire.ConsumeTag(u)
	return fmt.Errorf("The row has field number %d in %s, which the writer schema does not declare.", num, where)
}

func (p *rowPlan) row(m protoreflect.Message, where string) ([]bigquery.Value, error) {
	if err := unknownFields(m, "message "+string(p.md.FullName())); err != nil {
		return nil, err
	}
	out := make([]bigquery.Value, len(p.cols))
	for i := range p.cols {
		c := &p.cols[i]
		v, err := c.value(m)
		if err != nil {
			return nil, err
		}
		if v == nil && c.f.Required {
			return nil, fmt.Errorf("Required field %s is missing.", c.path)
		}
		out[i] = v
	}
	return out, nil
}

// value is the column's value in m: NULL if m does not have it (unless the
// writer schema declares a default for it, which proto2 readers see).
func (c *colPlan) value(m protoreflect.Message) (bigquery.Value, error) {
	if c.fd == nil {
		return nil, nil
	}
	if c.f.Repeated {
		if !m.Has(c.fd) {
			return nil, nil
		}
		l := m.Get(c.fd).List()
		items := make([]bigquery.Value, l.Len())
		for k := range items {
			v, err := c.item(l.Get(k))
			if err != nil {
				return nil, err
			}
			items[k] = v
		}
		return items, nil
	}
	if !m.Has(c.fd) {
		if c.fd.HasDefault() && c.fd.Message() == nil {
			return c.item(c.fd.Default())
		}
		return nil, nil
	}
	return c.item(m.Get(c.fd))
}

func (c *colPlan) item(v protoreflect.Value) (bigquery.Value, error) {
	switch {
	case c.sub != nil:
		return c.sub.row(v.Message(), c.path)
	case c.ts:
		m := v.Message()
		if err := unknownFields(m, "google.protobuf.Timestamp"); err != nil {
			return nil, err
		}
		fs := m.Descriptor().Fields()
		sec, nanos := m.Get(fs.ByName("seconds")).Int(), m.Get(fs.ByName("nanos")).Int()
		if nanos < 0 || nanos > 999999999 || sec < minTimestampMicros/1000000 || sec > maxTimestampMicros/1000000 {
			return nil, fmt.Errorf("Timestamp field value is out of range: seconds %d nanos %d on field %s.", sec, nanos, c.path)
		}
		return time.UnixMicro(sec*1e6 + nanos/1000).UTC(), nil
	case c.inner != nil:
		m := v.Message()
		if err := unknownFields(m, string(m.Descriptor().FullName())); err != nil {
			return nil, err
		}
		v = m.Get(c.inner)
	}
	out, err := c.conv(v)
	if err != nil {
		return nil, fmt.Errorf("%v on field %s.", err, c.path)
	}
	return out, nil
}

// The proto kinds of each width.
func signedKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return true
	}
	return false
}

func signed64Kind(k protoreflect.Kind) bool {
	return k == protoreflect.Int64Kind || k == protoreflect.Sint64Kind || k == protoreflect.Sfixed64Kind
}

func unsigned32Kind(k protoreflect.Kind) bool {
	return k == protoreflect.Uint32Kind || k == protoreflect.Fixed32Kind
}

func unsigned64Kind(k protoreflect.Kind) bool {
	return k == protoreflect.Uint64Kind || k == protoreflect.Fixed64Kind
}

// scalarConv returns the conversion of a proto scalar of kind k into the
// column f's value, by the service's table of supported protocol buffer
// types; nil if the service does not accept that kind for the column's
// type. fd is the field (or a wrapper's value field), for enums.
func scalarConv(f *bigquery.FieldSchema, path string, k protoreflect.Kind, fd protoreflect.FieldDescriptor) convFunc {
	switch f.Type {
	case bigquery.IntegerFieldType:
		switch {
		case signedKind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) { return v.Int(), nil }
		case unsigned32Kind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) { return int64(v.Uint()), nil }
		case k == protoreflect.EnumKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return int64(v.Enum()), nil }
		}
	case bigquery.FloatFieldType:
		if k == protoreflect.DoubleKind || k == protoreflect.FloatKind {
			return func(v protoreflect.Value) (bigquery.Value, error) { return v.Float(), nil }
		}
	case bigquery.BooleanFieldType:
		switch {
		case k == protoreflect.BoolKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return v.Bool(), nil }
		case signedKind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) { return v.Int() != 0, nil }
		case unsigned32Kind(k), unsigned64Kind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) { return v.Uint() != 0, nil }
		}
	case bigquery.StringFieldType:
		switch k {
		case protoreflect.StringKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return checkString(f, path, v.String()) }
		case protoreflect.EnumKind:
			return func(v protoreflect.Value) (bigquery.Value, error) {
				ev := fd.Enum().Values().ByNumber(v.Enum())
				if ev == nil {
					return nil, fmt.Errorf("Enum value %d of %s has no name", v.Enum(), fd.Enum().FullName())
				}
				return checkString(f, path, string(ev.Name()))
			}
		}
	case bigquery.BytesFieldType:
		switch k {
		case protoreflect.BytesKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return checkBytes(f, path, v.Bytes()) }
		case protoreflect.StringKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return checkBytes(f, path, []byte(v.String())) }
		}
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		bignum := f.Type == bigquery.BigNumericFieldType
		switch {
		case signedKind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) {
				return decimal(new(big.Rat).SetInt64(v.Int()), bignum)
			}
		case unsigned32Kind(k), unsigned64Kind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) {
				return decimal(new(big.Rat).SetInt(new(big.Int).SetUint64(v.Uint())), bignum)
			}
		case k == protoreflect.DoubleKind || k == protoreflect.FloatKind:
			bits := 64
			if k == protoreflect.FloatKind {
				bits = 32
			}
			return func(v protoreflect.Value) (bigquery.Value, error) {
				x := v.Float()
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return nil, fmt.Errorf("Invalid %s value: %v", f.Type, x)
				}
				return decimalString(strconv.FormatFloat(x, 'g', -1, bits), bignum)
			}
		case k == protoreflect.StringKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return decimalString(v.String(), bignum) }
		case k == protoreflect.BytesKind:
			return func(v protoreflect.Value) (bigquery.Value, error) { return decimalBytesLE(v.Bytes(), bignum) }
		}
	case bigquery.DateFieldType:
		switch {
		case signedKind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) {
				d := v.Int()
				if d < minDateDays || d > maxDateDays {
					return nil, fmt.Errorf("Date field value is out of range: %d", d)
				}
				return epochDate.AddDays(int(d)), nil
			}
		case k == protoreflect.StringKind:
			return fromString("DATE", parseDate)
		}
	case bigquery.DateTimeFieldType:
		return packedOrString(k, "DATETIME", unpackDateTime, parseDateTime)
	case bigquery.TimeFieldType:
		return packedOrString(k, "TIME", unpackTime, parseTime)
	case bigquery.TimestampFieldType:
		switch {
		case signedKind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) { return timestampMicros(v.Int()) }
		case unsigned32Kind(k):
			return func(v protoreflect.Value) (bigquery.Value, error) { return timestampMicros(int64(v.Uint())) }
		}
	case bigquery.GeographyFieldType:
		if k == protoreflect.StringKind {
			return func(v protoreflect.Value) (bigquery.Value, error) { return checkGeography(v.String()) }
		}
	case bigquery.JSONFieldType:
		if k == protoreflect.StringKind {
			return func(v protoreflect.Value) (bigquery.Value, error) { return checkJSON(v.String()) }
		}
	}
	return nil
}

// The service's ranges.
const (
	minDateDays        = -719162                  // 0001-01-01
	maxDateDays        = 2932896                  // 9999-12-31
	minTimestampMicros = -62135596800000000       // 0001-01-01 00:00:00 UTC
	maxTimestampMicros = 253402300799999999       // 9999-12-31 23:59:59.999999 UTC
	maxDecimalExponent = 1000                     // |exponent| of a decimal string beyond which it is refused
	packedDateTimeMask = int64(0xFFFFFFFFFFFFFFF) // the bits of a packed DATETIME (micros)
	packedTimeMask     = int64(0x1FFFFFFFFF)      // the bits of a packed TIME (micros)
	microsMask         = int64(0xFFFFF)           // the micros of a packed value
	microsShift        = 20                       // the bits of micros in a packed value
)

var (
	numericMax    = mustRat("99999999999999999999999999999.999999999")
	numericMin    = new(big.Rat).Neg(numericMax)
	bigNumericMax = mustRat("578960446186580977117854925043439539266.34992332820282019728792003956564819967")
	bigNumericMin = mustRat("-578960446186580977117854925043439539266.34992332820282019728792003956564819968")
	decimalRE     = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE]([+-]?[0-9]+))?$`)
)

func mustRat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("bqtest: bad decimal " + s)
	}
	return r
}

func timestampMicros(us int64) (bigquery.Value, error) {
	if us < minTimestampMicros || us > maxTimestampMicros {
		return nil, fmt.Errorf("Timestamp field value is out of range: %d", us)
	}
	return time.UnixMicro(us).UTC(), nil
}

func checkString(f *bigquery.FieldSchema, path, s string) (bigquery.Value, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("Field %s: STRING value is not valid UTF-8", path)
	}
	if f.MaxLength > 0 {
		if n := utf8.RuneCountInString(s); int64(n) > f.MaxLength {
			return nil, fmt.Errorf("Field %s: STRING(%d) has maximum length %d but got a value with length %d", path, f.MaxLength, f.MaxLength, n)
		}
	}
	return s, nil
}

func checkBytes(f *bigquery.FieldSchema, path string, b []byte) (bigquery.Value, error) {
	if f.MaxLength > 0 && int64(len(b)) > f.MaxLength {
		return nil, fmt.Errorf("Field %s: BYTES(%d) has maximum length %d but got a value with length %d", path, f.MaxLength, f.MaxLength, len(b))
	}
	return append([]byte{}, b...), nil
}

// checkGeography accepts WKT (by its leading keyword) or GeoJSON (a JSON
// object); the geometry itself is not checked.
func checkGeography(s string) (bigquery.Value, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	for _, kw := range []string{"POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION"} {
		if strings.HasPrefix(t, kw) {
			return s, nil
		}
	}
	if strings.HasPrefix(t, "{") && json.Valid([]byte(s)) {
		return s, nil
	}
	return nil, fmt.Errorf("Invalid GEOGRAPHY value %q: want WKT or GeoJSON", s)
}

func checkJSON(s string) (bigquery.Value, error) {
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("Invalid JSON value %q", s)
	}
	return s, nil
}

// decimalType is NUMERIC's or BIGNUMERIC's scale and range.
type decimalType struct {
	name     string
	scale    int
	pow      *big.Int // 10^scale
	lo, hi   *big.Rat
	ulo, uhi *big.Int // the range, unscaled
}

var numericType, bigNumericType = newDecimalType("NUMERIC", 9, numericMin, numericMax), newDecimalType("BIGNUMERIC", 38, bigNumericMin, bigNumericMax)

func newDecimalType(name string, scale int, lo, hi *big.Rat) *decimalType {
	d := &decimalType{name: name, scale: scale, pow: new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil), lo: lo, hi: hi}
	d.ulo = new(big.Int).Quo(new(big.Int).Mul(lo.Num(), d.pow), lo.Denom())
	d.uhi = new(big.Int).Quo(new(big.Int).Mul(hi.Num(), d.pow), hi.Denom())
	return d
}

func decimalOf(bignum bool) *decimalType {
	if bignum {
		return bigNumericType
	}
	return numericType
}

// decimal rounds r to the type's scale (9, or 38 for BIGNUMERIC), half away
// from zero, and checks the type's range.
func decimal(r *big.Rat, bignum bool) (bigquery.Value, error) {
	dt := decimalOf(bignum)
	num := new(big.Int).Mul(r.Num(), dt.pow)
	q, rem := new(big.Int).QuoRem(num, r.Denom(), new(big.Int))
	if new(big.Int).Mul(new(big.Int).Abs(rem), big.NewInt(2)).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(int64(num.Sign())))
	}
	if q.Cmp(dt.ulo) < 0 || q.Cmp(dt.uhi) > 0 {
		return nil, fmt.Errorf("%s value %s is out of range", dt.name, r.FloatString(dt.scale))
	}
	return new(big.Rat).SetFrac(q, dt.pow), nil
}

// decimalString parses a decimal literal (digits, a point, an exponent).
func decimalString(s string, bignum bool) (bigquery.Value, error) {
	m := decimalRE.FindStringSubmatch(strings.TrimSpace(s))
	name := "NUMERIC"
	if bignum {
		name = "BIGNUMERIC"
	}
	if m == nil {
		return nil, fmt.Errorf("Invalid %s value %q", name, s)
	}
	if m[4] != "" {
		if e, err := strconv.Atoi(m[4]); err != nil || e > maxDecimalExponent || e < -maxDecimalExponent {
			return nil, fmt.Errorf("%s value %q is out of range", name, s)
		}
	}
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return nil, fmt.Errorf("Invalid %s value %q", name, s)
	}
	return decimal(r, bignum)
}

// decimalBytesLE decodes the service's binary NUMERIC/BIGNUMERIC encoding
// (BigDecimalByteStringEncoder): the value times 10^scale as a
// little-endian two's-complement integer. No bytes is zero.
func decimalBytesLE(b []byte, bignum bool) (bigquery.Value, error) {
	dt := decimalOf(bignum)
	if len(b) > 64 {
		return nil, fmt.Errorf("%d bytes are too many for a %s value", len(b), dt.name)
	}
	var buf [64]byte
	be := buf[:len(b)]
	for i, x := range b {
		be[len(b)-1-i] = x
	}
	n := new(big.Int).SetBytes(be)
	if len(be) > 0 && be[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(be))))
	}
	if n.Cmp(dt.ulo) < 0 || n.Cmp(dt.uhi) > 0 {
		return nil, fmt.Errorf("%s value %s is out of range", dt.name, new(big.Rat).SetFrac(n, dt.pow).FloatString(dt.scale))
	}
	return new(big.Rat).SetFrac(n, dt.pow), nil
}

// fromString converts a string value with parse, failing "Invalid what
// string" where it does not parse.
func fromString[T any](what string, parse func(string) (T, bool)) convFunc {
	return func(v protoreflect.Value) (bigquery.Value, error) {
		x, ok := parse(v.String())
		if !ok {
			return nil, fmt.Errorf("Invalid %s string %q", what, v.String())
		}
		return x, nil
	}
}

// packedOrString is the conversion of kind k into a column of a type
// (what: DATETIME or TIME) sent as a packed int64, converted with unpack,
// or as a string, converted with parse; nil for other kinds.
func packedOrString[T any](k protoreflect.Kind, what string, unpack func(int64) (T, bool), parse func(string) (T, bool)) convFunc {
	switch {
	case signed64Kind(k):
		return func(v protoreflect.Value) (bigquery.Value, error) {
			x, ok := unpack(v.Int())
			if !ok {
				return nil, fmt.Errorf("Invalid %s packed value: %d", what, v.Int())
			}
			return x, nil
		}
	case k == protoreflect.StringKind:
		return fromString(what, parse)
	}
	return nil
}

// unpackTime decodes the packed TIME of CivilTimeEncoder: hour (5 bits),
// minute (6), second (6), micros (20), from the most significant side.
func unpackTime(v int64) (civil.Time, bool) {
	if v&^packedTimeMask != 0 {
		return civil.Time{}, false
	}
	t := unpackClock(v >> microsShift)
	t.Nanosecond = int(v&microsMask) * 1000
	return t, t.IsValid() && v&microsMask <= 999999
}

func unpackClock(secs int64) civil.Time {
	return civil.Time{Hour: int(secs >> 12 & 0x1F), Minute: int(secs >> 6 & 0x3F), Second: int(secs & 0x3F)}
}

// unpackDateTime decodes the packed DATETIME of CivilTimeEncoder: year (14
// bits), month (4), day (5), then a packed TIME.
func unpackDateTime(v int64) (civil.DateTime, bool) {
	if v&^packedDateTimeMask != 0 {
		return civil.DateTime{}, false
	}
	secs := v >> microsShift
	dt := civil.DateTime{
		Date: civil.Date{Year: int(secs >> 26 & 0x3FFF), Month: time.Month(secs >> 22 & 0xF), Day: int(secs >> 17 & 0x1F)},
		Time: unpackClock(secs & 0x1FFFF),
	}
	dt.Time.Nanosecond = int(v&microsMask) * 1000
	return dt, validDate(dt.Date) && dt.Time.IsValid() && v&microsMask <= 999999
}

func validDate(d civil.Date) bool { return d.Year >= 1 && d.Year <= 9999 && d.IsValid() }

// digits parses s as a decimal of 1 to max digits.
func digits(s string, max int) (int, bool) {
	if len(s) == 0 || len(s) > max {
		return 0, false
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parseDate parses a DATE literal: YYYY-[M]M-[D]D.
func parseDate(s string) (civil.Date, bool) {
	p := strings.Split(strings.TrimSpace(s), "-")
	if len(p) != 3 {
		return civil.Date{}, false
	}
	y, ok1 := digits(p[0], 4)
	m, ok2 := digits(p[1], 2)
	d, ok3 := digits(p[2], 2)
	date := civil.Date{Year: y, Month: time.Month(m), Day: d}
	return date, ok1 && ok2 && ok3 && validDate(date)
}

// parseClock parses [H]H:[M]M:[S]S[.F]: at most 6 fractional digits, or
// with truncate up to 9, truncated to microseconds.
func parseClock(s string, truncate bool) (civil.Time, bool) {
	p := strings.Split(s, ":")
	if len(p) != 3 {
		return civil.Time{}, false
	}
	sec, frac, hasFrac := strings.Cut(p[2], ".")
	h, ok1 := digits(p[0], 2)
	m, ok2 := digits(p[1], 2)
	sc, ok3 := digits(sec, 2)
	t := civil.Time{Hour: h, Minute: m, Second: sc}
	if hasFrac {
		maxFrac := 6
		if truncate {
			maxFrac = 9
		}
		f, ok := digits(frac, maxFrac)
		if !ok {
			return civil.Time{}, false
		}
		for i := len(frac); i < 9; i++ {
			f *= 10
		}
		t.Nanosecond = f / 1000 * 1000
	}
	return t, ok1 && ok2 && ok3 && t.IsValid()
}

// parseTime parses a TIME literal.
func parseTime(s string) (civil.Time, bool) { return parseClock(strings.TrimSpace(s), false) }

// parseDateTime parses a DATETIME literal: a date, then optionally ' ' or
// 'T' and a time.
func parseDateTime(s string) (civil.DateTime, bool) {
	return parseDateTimeFrac(strings.TrimSpace(s), false)
}

func parseDateTimeFrac(s string, truncate bool) (civil.DateTime, bool) {
	ds, ts, hasTime := strings.Cut(s, " ")
	if !hasTime {
		ds, ts, hasTime = strings.Cut(s, "T")
	}
	d, ok := parseDate(ds)
	if !ok {
		return civil.DateTime{}, false
	}
	dt := civil.DateTime{Date: d}
	if hasTime {
		if dt.Time, ok = parseClock(ts, truncate); !ok {
			return civil.DateTime{}, false
		}
	}
	return dt, true
}

// parseTimestamp parses a TIMESTAMP as tabledata.insertAll takes it: a
// date, optionally a time (fractions beyond microseconds truncated) and a
// zone (Z, UTC, +hh[:mm], -hh[:mm]), or seconds since the epoch as a
// number.
func parseTimestamp(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if decimalRE.MatchString(s) {
		r, ok := new(big.Rat).SetString(s)
		if !ok || len(s) > 40 {
			return time.Time{}, false
		}
		r.Mul(r, big.NewRat(1e6, 1))
		us := new(big.Int).Quo(r.Num(), r.Denom())
		if !us.IsInt64() || us.Int64() < minTimestampMicros || us.Int64() > maxTimestampMicros {
			return time.Time{}, false
		}
		return time.UnixMicro(us.Int64()).UTC(), true
	}
	ds, rest := s, ""
	if i := strings.IndexAny(s, " T"); i >= 0 {
		ds, rest = s[:i], strings.TrimSpace(s[i+1:])
	}
	d, ok := parseDate(ds)
	if !ok {
		return time.Time{}, false
	}
	offset := 0
	switch {
	case strings.HasSuffix(rest, "UTC"):
		rest = strings.TrimSpace(strings.TrimSuffix(rest, "UTC"))
	case strings.HasSuffix(rest, "Z"):
		rest = strings.TrimSuffix(rest, "Z")
	default:
		if i := strings.IndexAny(rest, "+-"); i >= 0 {
			hh, mm, hasMin := strings.Cut(rest[i+1:], ":")
			h, ok1 := digits(hh, 2)
			m, ok2 := 0, true
			if hasMin {
				m, ok2 = digits(mm, 2)
			}
			if !ok1 || !ok2 || h > 14 || m > 59 {
				return time.Time{}, false
			}
			offset = (h*60 + m) * 60
			if rest[i] == '-' {
				offset = -offset
			}
			rest = strings.TrimSpace(rest[:i])
		}
	}
	dt := civil.DateTime{Date: d}
	if rest != "" {
		if dt.Time, ok = parseClock(rest, true); !ok {
			return time.Time{}, false
		}
	}
	t := dt.In(time.UTC).Add(-time.Duration(offset) * time.Second)
	if us := t.UnixMicro(); us < minTimestampMicros || us > maxTimestampMicros {
		return time.Time{}, false
	}
	return t, true
}
