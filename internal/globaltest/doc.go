// Package globaltest holds the tests that importing and using sdfio's IOs
// changes nothing else in a program: its own PCollections of time.Time,
// *big.Rat, the civil types and structs holding them are encoded exactly as
// in the same program without sdfio (globaltest/without, built and run by
// the test), and registering logical types or coders of its own for those
// types does not panic (globaltest/userreg, a test binary of its own,
// since registrations are for the whole process).
package globaltest
