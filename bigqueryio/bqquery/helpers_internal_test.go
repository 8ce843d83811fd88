package bqquery

import "github.com/sdfio/sdfio/bigqueryio/internal/readtest"

// The server and table of the internal tests (internal/readtest).
var (
	newTestServer = readtest.NewServer
	eventsTable   = readtest.EventsTable
)
