// Package ioerr is the one shape of the module's errors about a place in
// an input: a file (and, in container files, a byte offset), a kind that
// callers test with errors.Is, what was wrong in words, and a cause.
// container.Error and filesource.Error are that shape, and write their
// text and unwrap through this package:
//
//	<where>: <kind>[: <what was wrong>][: <cause>]
//
// where <where> names the file first. errors.Is finds the kind and the
// cause (and errors.As the cause's types).
package ioerr

import "strings"

// Text is where, then the kind, the message and the cause, each after
// ": " and left out when empty or nil.
func Text(where string, kind error, msg string, cause error) string {
	var b strings.Builder
	b.WriteString(where)
	b.WriteString(": ")
	if kind != nil {
		b.WriteString(kind.Error())
	}
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	if cause != nil {
		b.WriteString(": ")
		b.WriteString(cause.Error())
	}
	return b.String()
}

// Unwrap is what an error of this shape unwraps to: its kind, the kinds
// that kind implies (also), and its cause, the nil ones left out.
func Unwrap(kind, cause error, also ...error) []error {
	errs := make([]error, 0, 2+len(also))
	if kind != nil {
		errs = append(errs, kind)
	}
	errs = append(errs, also...)
	if cause != nil {
		errs = append(errs, cause)
	}
	return errs
}
