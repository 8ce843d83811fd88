package bqwrite

import (
	"reflect"

	"google.golang.org/api/option"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// What Write shares with bigqueryio's Read and Query, under the names this
// package's files use.

// Row is a generic row, bqwrite.Row: a map of column names to values,
// as the official client's RowIterator fills a map[string]bigquery.Value.
// Write writes a PCollection of Row by column name.
type Row = bqcore.Row

type (
	givenOption = bqcore.Given
	rawArg      = bqcore.RawArg
	restClient  = bqcore.Client
)

var (
	newClient          = bqcore.NewClient
	isHTTP             = bqcore.IsHTTP
	fieldsOf           = bqcore.FieldsOf
	fieldAlloc         = bqcore.FieldAlloc
	ambiguousError     = bqcore.AmbiguousError
	typeOfRow          = bqcore.TypeOfRow
	checkRepeats       = bqcore.CheckRepeats
	checkClientOptions = bqcore.CheckClientOptions
	connOptions        = bqcore.ConnOptions
	tableResource      = bqcore.TableResource
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
// options for the Writes given WithClientOptions(name). It is
// bqwrite.RegisterClientOptions: one registry serves both packages.
// Call it in an init function, so that every worker process registers it
// too. It panics on an empty name or a nil f.
func RegisterClientOptions(name string, f func() []option.ClientOption) {
	bqcore.RegisterClientOptions(name, f)
}

// RegisterType registers t, a struct type of rows (or a pointer to one),
// with Beam and gives it a coder of its own when it holds a field type
// Beam's own coder cannot carry between stages. It is
// bqwrite.RegisterType.
func RegisterType(t reflect.Type) { bqcore.RegisterType(t) }
