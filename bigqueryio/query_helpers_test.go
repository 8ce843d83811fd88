package bigqueryio_test

import "github.com/sdfio/sdfio/bigqueryio/internal/readtest"

// The query of the tests that run bqquery.Query beside Read and Write
// (client_options_test.go, example_readme_test.go), as bqquery's own
// tests have it.
const evenSQL = readtest.EvenSQL

var queryServer = readtest.QueryServer
