package avroio

// The file layer comes from package offsetsource/filesource; these names
// keep avroio's API whole, so that a pipeline needs only avroio.

import (
	"time"

	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// RangeReadFunc reads up to length bytes of the file at path from byte
// offset on (see filesource.RangeReadFunc).
type RangeReadFunc = filesource.RangeReadFunc

// RegisterRangeReader makes reads of files whose path starts with
// scheme:// use fn for ranged reads, so that a read starting deep in a file
// does not fetch the bytes before it. Importing package
// offsetsource/filesource/gcsrange registers gs://. It
// registers fn for every format of package filesource
// (filesource.RegisterRangeReader). Call it from an init function, so that
// workers have it too.
func RegisterRangeReader(scheme string, fn RangeReadFunc) {
	filesource.RegisterRangeReader(scheme, fn)
}

// EmptyMatchTreatment says whether a file pattern that matches no file is
// an error, as Beam Java's EmptyMatchTreatment does (see
// filesource.EmptyMatchTreatment).
type EmptyMatchTreatment = filesource.EmptyMatchTreatment

const (
	// emptyMatchDefault means "the transform's default".
	emptyMatchDefault EmptyMatchTreatment = 0
	// EmptyMatchAllow: a pattern that matches nothing reads no records.
	EmptyMatchAllow = filesource.EmptyMatchAllow
	// EmptyMatchDisallow: a pattern that matches nothing is an error. The
	// default of Read and ReadGeneric.
	EmptyMatchDisallow = filesource.EmptyMatchDisallow
	// EmptyMatchAllowIfWildcard: a pattern that matches nothing is an
	// error unless it has a wildcard: * ? [ or a brace group {a,b} (see
	// filesource.HasWildcard). The default of ReadAll.
	EmptyMatchAllowIfWildcard = filesource.EmptyMatchAllowIfWildcard
)

// Termination says when a watch stops polling for new files (Java's
// Watch.Growth.TerminationCondition; see filesource.Termination).
type Termination = filesource.Termination

// Never polls for ever.
func Never() Termination { return filesource.Never() }

// AfterDuration stops polling once more than d has passed since the watch
// began (Java's afterTotalOf).
func AfterDuration(d time.Duration) Termination { return filesource.AfterDuration(d) }

// AfterNoNewFilesFor stops polling once more than d has passed without a
// poll finding a new or changing file (see filesource.AfterNoNewFilesFor).
func AfterNoNewFilesFor(d time.Duration) Termination { return filesource.AfterNoNewFilesFor(d) }

// EitherOf stops polling as soon as any of the conditions holds (Java's
// eitherOf).
func EitherOf(conditions ...Termination) Termination { return filesource.EitherOf(conditions...) }
