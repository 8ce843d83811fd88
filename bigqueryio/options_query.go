package bigqueryio

import (
	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// The options of Query alone (QueryOption). Query also takes the
// SessionOptions of options.go, as Read does.

// WithLegacySQL runs Query's SQL as legacy SQL; standard SQL is the default.
func WithLegacySQL() QueryOption {
	return queryOnlyOption(func(c *readConfig) { c.note("WithLegacySQL"); c.Query.LegacySQL = true })
}

// WithQueryPriority runs Query's job at priority p: bigquery.InteractivePriority
// (the service's default) or bigquery.BatchPriority (queued until resources
// are idle; it may wait for hours).
func WithQueryPriority(p bigquery.QueryPriority) QueryOption {
	return queryOnlyOption(func(c *readConfig) { c.note("WithQueryPriority", string(p)); c.Query.Priority = string(p) })
}

// WithQueryLocation runs Query's job, and creates its temporary dataset, in
// location (US, EU, europe-west1, ...): the location of the tables the query
// reads. Without it Query asks a dry run of the query where it runs; when
// the dry run does not say, it takes the location of the first table the
// dry run reports the query reads; failing both (a query of no table), the
// job and the dataset name no location and the service places them (in US).
func WithQueryLocation(location string) QueryOption {
	return queryOnlyOption(func(c *readConfig) { c.note("WithQueryLocation", location); c.Query.Location = location })
}

// WithQueryTempDataset writes Query's result into a new table of dataset (an
// id in the billing project, in the query's location), which Query removes
// afterwards, instead of into a temporary dataset of its own. The account
// then needs no right to create datasets.
func WithQueryTempDataset(dataset string) QueryOption {
	return queryOnlyOption(func(c *readConfig) { c.note("WithQueryTempDataset", dataset); c.Query.TempDataset = dataset })
}

// WithQueryParameters gives Query's SQL its parameters: all named (Name
// set, @name in the SQL) or all positional (no names, ? in the SQL, in
// order), as bigquery.Query.Parameters takes them. A Value is any Go value
// the official client maps to a BigQuery type (see
// bigquery.QueryParameter: integers, floats, bool, string, []byte,
// time.Time, civil.Date, civil.Time, civil.DateTime, *big.Rat (NUMERIC),
// *bigquery.IntervalValue, the bigquery.NullX types for NULL, slices and
// arrays of them, structs of them), or an explicit
// *bigquery.QueryParameterValue (BIGNUMERIC, say); RANGE parameters are not
// supported. The values are turned into their BigQuery types and text when
// the pipeline is built, so that they travel to the workers exactly; a
// value the client could not send, names mixed with positions, parameters
// with WithLegacySQL, or WithQueryParameters given twice are refused then.
// The dry run and the job both get them.
func WithQueryParameters(params ...bigquery.QueryParameter) QueryOption {
	return queryOnlyOption(func(c *readConfig) {
		c.note("WithQueryParameters", bqcore.ParamsText(params)...)
		c.QueryParams, c.paramsErr = bqcore.EncodeParams(params)
	})
}

// WithRESTEndpoint sends the BigQuery REST API calls of Query (query jobs,
// datasets, tables) to url instead of Google's endpoint: a test server's,
// such as bqtest's RESTEndpoint (with WithInsecure, which drops
// credentials there too). bqwrite.WithRESTEndpoint is Write's.
func WithRESTEndpoint(url string) QueryOption {
	return queryOnlyOption(func(c *readConfig) { c.note("WithRESTEndpoint", url); c.Query.REST = url })
}
