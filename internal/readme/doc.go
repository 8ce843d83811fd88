// Package readme holds the test that keeps README.md honest: every Go code
// block in it must be quoted from a file of the module that is compiled and
// tested, and every `go run ./path` in a shell block must name a directory
// that exists.
//
// A Go block is preceded by a line
//
//	<!-- quoted from path/to/file_test.go -->
//
// and its lines must appear in that file in order, verbatim but for leading
// and trailing white space. A line "// ..." in the block stands for any
// number of lines of the file that the README leaves out.
package readme
