// Package avrotest runs sdftest's split checks on avroio's real source:
//
//	s, err := avrotest.Subject(ctx, "/data/events.avro", reflect.TypeFor[Event]())
//	if err != nil {
//		t.Fatal(err)
//	}
//	sdftest.AssertSplitAtFractionExhaustive(t, s)
//
// It lives apart from avroio so that avroio's users' binaries link neither
// sdftest nor the testing package.
package avrotest

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/offsetsource/sourcetest"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// Subject returns an sdftest.Subject over the Avro file at path read as
// records of type t with the options, exactly as avroio.Read reads it (see
// avroio.FileSource). Records are the decoded values (of type t) as beam.X.
func Subject(ctx context.Context, path string, t reflect.Type, opts ...avroio.ReadFilesOption) (sdftest.Subject[beam.X], error) {
	src, err := avroio.FileSource(ctx, path, t, opts...)
	if err != nil {
		return sdftest.Subject[beam.X]{}, err
	}
	s, err := sourcetest.Subject(ctx, src)
	if err != nil {
		return sdftest.Subject[beam.X]{}, fmt.Errorf("avrotest.Subject of %s: %w", path, err)
	}
	return s, nil
}
