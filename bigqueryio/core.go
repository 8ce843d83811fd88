package bigqueryio

import (
	"reflect"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/option"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// What Read and Query share with bqwrite, under the names this package's
// files use.

// Row is a generic row (see bqcore.Row): Read(s, table,
// reflect.TypeOf(bigqueryio.Row{})) reads every selected column by name.
// bqwrite.Row is the same type.
type Row = bqcore.Row

type (
	givenOption = bqcore.Given
	rawArg      = bqcore.RawArg
	structField = bqcore.StructField
	fieldRules  = bqcore.FieldRules
)

var (
	fieldsOf           = bqcore.FieldsOf
	fieldAlloc         = bqcore.FieldAlloc
	unknownFieldsError = bqcore.UnknownFieldsError
	ambiguousError     = bqcore.AmbiguousError
	checkType          = bqcore.CheckType
	checkCoder         = bqcore.CheckCoder
	rowOf              = bqcore.RowOf
	typeOfRow          = bqcore.TypeOfRow
	checkRepeats       = bqcore.CheckRepeats
	checkClientOptions = bqcore.CheckClientOptions
	connOptions        = bqcore.ConnOptions
	tableResource      = bqcore.TableResource
	splitTableSpec     = bqcore.SplitTableSpec
	validProject       = bqcore.ValidProject
	retryBackoff       = bqcore.RetryBackoff
	funcName           = bqcore.FuncName
)

// must is v, panicking with err if it is not nil.
func must[T any](v T, err error) T { return bqcore.Must(v, err) }

// applyOptions applies opts to c in order, refusing a nil option.
func applyOptions[C, O any](transform string, c *C, opts []O, apply func(O, *C)) error {
	return bqcore.ApplyOptions(transform, c, opts, apply, func(any) bool { return false })
}

// RegisterClientOptions registers, under name, a function returning client
// options for the transforms given WithClientOptions(name): credentials,
// a quota project, headers, interceptors. Call it in an init function, so
// that every worker process registers it too. f is called each time one
// of those transforms makes a client, on the worker that makes it; it may
// return fresh values each time. Registering a name again replaces its
// function. bqwrite.RegisterClientOptions is the same registry: a name
// registered through either package serves both.
// RegisterClientOptions panics on an empty name or a nil f.
func RegisterClientOptions(name string, f func() []option.ClientOption) {
	bqcore.RegisterClientOptions(name, f)
}

// RegisterType registers t, a struct type of rows (or a pointer to one),
// with Beam, as beam.RegisterType does, and gives t a coder of its own
// when it holds a field type Beam's own coder cannot carry between stages
// (see bqcore.RegisterType). bqwrite.RegisterType is the same function.
func RegisterType(t reflect.Type) { bqcore.RegisterType(t) }

// EncodeRow is the encoding of r that Row's coder uses.
func EncodeRow(r Row) ([]byte, error) { return bqcore.EncodeRow(r) }

// DecodeRow decodes what EncodeRow encoded.
func DecodeRow(b []byte) (Row, error) { return bqcore.DecodeRow(b) }

var _ = bigquery.Value(nil)
