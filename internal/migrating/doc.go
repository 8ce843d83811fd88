// Package migrating holds the compiled examples docs/MIGRATING.md quotes:
// each Beam Go io call beside the sdfio call that replaces it. The
// examples are compiled by `go test` (they have no Output, so they do not
// run: they need Google Cloud projects); internal/readme checks that
// MIGRATING.md quotes them verbatim.
package migrating
