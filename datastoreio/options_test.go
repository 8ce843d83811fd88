package datastoreio_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/datastoreio"
)

// TestOptionTypes: the options of one side are not options of the other,
// so that giving one to the wrong transform does not compile; the shared
// ones are both.
func TestOptionTypes(t *testing.T) {
	readOnly := []any{
		datastoreio.WithNamespace("ns"), datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(4),
		datastoreio.WithSubRangesPerSplit(2), datastoreio.WithReadTime(time.Unix(1, 0)), datastoreio.WithLatestData(),
		datastoreio.WithSnapshot(), datastoreio.WithVersionRetention(time.Hour),
	}
	writeOnly := []any{
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithHintNumWorkers(3),
		datastoreio.WithAllocateIDs(), datastoreio.WithCommitRetries(1, time.Second),
	}
	shared := []any{datastoreio.WithDatabase("db"), datastoreio.WithClientOptions("x"), datastoreio.WithMetricsNamespace("m")}
	for _, o := range readOnly {
		if _, ok := o.(datastoreio.WriteOption); ok {
			t.Errorf("read option %T is a WriteOption", o)
		}
		if _, ok := o.(datastoreio.ReadOption); !ok {
			t.Errorf("read option %T is not a ReadOption", o)
		}
	}
	for _, o := range writeOnly {
		if _, ok := o.(datastoreio.ReadOption); ok {
			t.Errorf("write option %T is a ReadOption", o)
		}
		if _, ok := o.(datastoreio.WriteOption); !ok {
			t.Errorf("write option %T is not a WriteOption", o)
		}
	}
	for _, o := range shared {
		_, r := o.(datastoreio.ReadOption)
		_, w := o.(datastoreio.WriteOption)
		if !r || !w {
			t.Errorf("shared option %T: ReadOption %v, WriteOption %v; want both", o, r, w)
		}
	}
}

// TestReadOptionErrors: values that cannot work, and options that
// contradict each other, are refused when the pipeline is built (Read
// panics, Plan returns the error before it connects), naming the transform
// and the option.
func TestReadOptionErrors(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := datastoreio.NewQuery("K")
	for _, c := range []struct {
		name string
		opts []datastoreio.ReadOption
		want string
	}{
		{"negative splits", []datastoreio.ReadOption{datastoreio.WithNumQuerySplits(-1)}, "WithNumQuerySplits(-1): a negative split count"},
		{"no keys per split", []datastoreio.ReadOption{datastoreio.WithKeysPerSplit(0)}, "WithKeysPerSplit(0): at least 1 key per split"},
		{"no sub-ranges", []datastoreio.ReadOption{datastoreio.WithSubRangesPerSplit(-3)}, "WithSubRangesPerSplit(-3): at least 1 sub-range per split"},
		{"read time and latest", []datastoreio.ReadOption{datastoreio.WithReadTime(at), datastoreio.WithLatestData()},
			"WithReadTime(2026-01-02T03:04:05Z) and WithLatestData() exclude each other"},
		{"zero read time", []datastoreio.ReadOption{datastoreio.WithReadTime(time.Time{})}, "WithReadTime(time.Time{}): a zero time"},
		{"snapshot and latest", []datastoreio.ReadOption{datastoreio.WithSnapshot(), datastoreio.WithLatestData()},
			"WithSnapshot() and WithLatestData() exclude each other"},
		{"snapshot and read time", []datastoreio.ReadOption{datastoreio.WithSnapshot(), datastoreio.WithReadTime(at)},
			"WithSnapshot() and WithReadTime(2026-01-02T03:04:05Z) exclude each other"},
		{"retention of the latest data", []datastoreio.ReadOption{datastoreio.WithVersionRetention(2 * time.Hour)},
			"WithVersionRetention(2h0m0s) applies to snapshot reads only: give WithSnapshot() or WithReadTime"},
		{"retention under a minute", []datastoreio.ReadOption{datastoreio.WithSnapshot(), datastoreio.WithVersionRetention(time.Second)},
			"WithVersionRetention(1s): a retention under a minute"},
		{"point-in-time read time not a whole minute", []datastoreio.ReadOption{datastoreio.WithReadTime(at), datastoreio.WithVersionRetention(7 * 24 * time.Hour)},
			"WithReadTime(2026-01-02T03:04:05Z) with WithVersionRetention(168h0m0s): versions older than an hour are kept at whole minutes only"},
		{"namespace twice", []datastoreio.ReadOption{datastoreio.WithNamespace("a"), datastoreio.WithNamespace("b")},
			`WithNamespace("a") and WithNamespace("b") are both given: give WithNamespace once`},
		{"splits twice", []datastoreio.ReadOption{datastoreio.WithNumQuerySplits(2), datastoreio.WithNumQuerySplits(3)},
			"WithNumQuerySplits(2) and WithNumQuerySplits(3) are both given"},
		{"empty metrics namespace", []datastoreio.ReadOption{datastoreio.WithMetricsNamespace("")}, `WithMetricsNamespace(""): an empty metrics namespace`},
		{"nil option", []datastoreio.ReadOption{nil}, "a nil ReadOption"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := datastoreio.Plan(context.Background(), "p", q, c.opts...); err == nil || !strings.Contains(err.Error(), "datastoreio.Plan: "+c.want) {
				t.Errorf("Plan: %v, want an error saying %q", err, "datastoreio.Plan: "+c.want)
			}
			func() {
				defer func() {
					if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "datastoreio.Read: "+c.want) {
						t.Errorf("Read: panic %v, want one saying %q", r, "datastoreio.Read: "+c.want)
					}
				}()
				_, s := beam.NewPipelineWithRoot()
				datastoreio.Read(s, "p", q, reflect.TypeFor[item](), c.opts...)
			}()
		})
	}
	// The same option given twice alike is taken.
	if _, s := beam.NewPipelineWithRoot(); true {
		datastoreio.Read(s, "p", q, reflect.TypeFor[item](), datastoreio.WithNamespace("a"), datastoreio.WithNamespace("a"))
	}
}

// unregistered is a named element type no init registers with Beam.
type unregistered struct {
	K *datastore.Key `datastore:"__key__"`
	N int64
}

func emitUnregistered(_ []byte, emit func(unregistered))     {}
func emitUnregisteredPtr(_ []byte, emit func(*unregistered)) {}

// TestUnregisteredType: every read and write transform refuses a named
// element type not registered with Beam when the pipeline is built, naming
// the type and beam.RegisterType (before, a separate worker process would
// have decoded into an anonymous copy of it); registered and package types
// are taken.
func TestUnregisteredType(t *testing.T) {
	const want = "unregistered is not registered with Beam: call datastoreio.RegisterType(reflect.TypeFor[datastoreio_test.unregistered]()) in an init function"
	panics := func(t *testing.T, transform string, build func(s beam.Scope)) {
		t.Helper()
		defer func() {
			t.Helper()
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), transform+": element type ") || !strings.Contains(fmt.Sprint(r), want) {
				t.Errorf("%s: panic %v, want one saying %q", transform, r, want)
			}
		}()
		_, s := beam.NewPipelineWithRoot()
		build(s)
	}
	q := datastoreio.NewQuery("K")
	// The inputs come from a DoFn, not beam.Create: Beam v2.78's Create
	// encodes its values when the pipeline is built, and Beam's row coder
	// recurses without end into *datastore.Key's Parent (a stack overflow)
	// for a type RegisterType did not give a coder.
	of := func(s beam.Scope, v any) beam.PCollection {
		return beam.ParDo(s, v, beam.Impulse(s))
	}
	panics(t, "datastoreio.Read", func(s beam.Scope) { datastoreio.Read(s, "p", q, reflect.TypeFor[unregistered]()) })
	panics(t, "datastoreio.Write", func(s beam.Scope) { datastoreio.Write(s, "p", of(s, emitUnregistered)) })
	panics(t, "datastoreio.Write", func(s beam.Scope) { datastoreio.Write(s, "p", of(s, emitUnregisteredPtr)) })
	panics(t, "datastoreio.DeleteEntity", func(s beam.Scope) { datastoreio.DeleteEntity(s, "p", of(s, emitUnregistered)) })

	_, s := beam.NewPipelineWithRoot()
	for _, ok := range []reflect.Type{reflect.TypeFor[item](), reflect.TypeFor[*datastore.Entity](), reflect.TypeFor[datastore.PropertyList]()} {
		datastoreio.Read(s, "p", q, ok)
	}
	// A struct holding a key that RegisterType did not give a coder is
	// refused, named with the call that gives it one: Beam's own row coder
	// cannot carry *datastore.Key (its Parent recurses).
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "holds *datastore.Key (field K)") || !strings.Contains(fmt.Sprint(r), "datastoreio.RegisterType(") {
				t.Errorf("Read of an unnamed struct holding a key: panic %v, want one naming the field and datastoreio.RegisterType", r)
			}
		}()
		datastoreio.Read(s, "p", q, reflect.TypeFor[struct {
			K *datastore.Key `datastore:"__key__"`
		}]())
	}()
	datastoreio.Read(s, "p", q.KeysOnly(), reflect.TypeFor[*datastore.Key]())
	datastoreio.Write(s, "p", beam.Create(s, item{N: 1}))
	datastoreio.DeleteKey(s, "p", beam.Create(s, datastore.IDKey("K", 1, nil)))
}
