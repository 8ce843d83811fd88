package windowing

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/sdfio/sdfio/internal/testtmp"
)

func init() {
	register.Function1x2(stamp)
	register.Function1x1(half)
	register.Function2x1(keys)
	register.Iter1[int64]()
}

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

// stamp gives element i the event time i seconds.
func stamp(i int64) (beam.EventTime, int64) { return beam.EventTime(i * 1000), i }

// keys is the key of a group.
func keys(k int, _ func(*int64) bool) int { return k }

func half(i int64) int64 { return i / 2 }

// TestUnbounded: Beam marks a splittable DoFn's continuation output, and
// what follows it, unbounded; Create and its ParDos bounded.
func TestUnbounded(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	bounded := beam.Create(s, int64(1))
	if Unbounded(bounded) || Unbounded(beam.ParDo(s, half, bounded)) {
		t.Errorf("Create seen as unbounded: %v", bounded)
	}
	now := time.Now()
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(now, now.Add(time.Second), time.Second)))
	if !Unbounded(seq) || !Unbounded(beam.ParDo(s, half, seq)) {
		t.Errorf("periodic.Sequence seen as bounded: %v", seq)
	}
}

// TestGlobal: 10 elements one second apart in sliding windows of 3 s
// every 1 s are 30 elements-in-windows; in the global window they are 30
// elements, and one GroupByKey (no IntervalWindow) sees them all.
func TestGlobal(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	var xs []any
	for i := int64(0); i < 10; i++ {
		xs = append(xs, i)
	}
	col := beam.ParDo(s, stamp, beam.Create(s, xs...))
	for name, fn := range map[string]*window.Fn{
		"fixed":   window.NewFixedWindows(2 * time.Second),
		"sliding": window.NewSlidingWindows(time.Second, 3*time.Second),
		"session": window.NewSessions(1500 * time.Millisecond),
	} {
		s := s.Scope(name)
		g := Global(s, beam.WindowInto(s, fn, col))
		copies := 1
		if name == "sliding" {
			copies = 3
		}
		passert.Count(s, g, name, 10*copies)
		passert.Count(s, beam.ParDo(s, keys, beam.GroupByKey(s, beam.AddFixedKey(s, g))), name+" groups", 1)
		passert.Equals(s, stats.Sum(s, g), int64(45*copies))
	}
	if Global(s, col) != col {
		t.Error("Global of a global-window PCollection added a step")
	}
	ptest.RunAndValidate(t, p)
}

// TestUnboundedForms holds Beam to the two forms of PCollection.String
// that Unbounded reads (graph.Node.String of Beam Go v2.78): a bounded
// PCollection is "{<id>: <type>/<coder> <windowing>}", an unbounded one
// the same with ":unbounded" before the brace, for PCollections of
// several kinds, windowings and coders. It fails when a Beam release
// changes the form; Unbounded then panics naming the Beam version instead
// of taking unbounded input for bounded.
func TestUnboundedForms(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	now := time.Now()
	bounded := beam.Create(s, int64(1))
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(now, now.Add(time.Second), time.Second)))
	for _, c := range []struct {
		name      string
		col       beam.PCollection
		unbounded bool
	}{
		{"Create", bounded, false},
		{"ParDo of Create", beam.ParDo(s, half, bounded), false},
		{"fixed windows", beam.WindowInto(s, window.NewFixedWindows(time.Second), bounded), false},
		{"KV", beam.AddFixedKey(s, bounded), false},
		{"periodic.Sequence", seq, true},
		{"ParDo of it", beam.ParDo(s, half, seq), true},
		{"sliding windows of it", beam.WindowInto(s, window.NewSlidingWindows(time.Second, 3*time.Second), seq), true},
	} {
		str, b := c.col.String(), body(c.col)
		want := "}"
		if c.unbounded {
			want = ":unbounded}"
		}
		if !strings.HasPrefix(str, "{") || !strings.HasSuffix(str, ": "+b+want) {
			t.Errorf("%s: PCollection.String() is %q, want \"{<id>: %s%s\": Beam changed the form Unbounded reads", c.name, str, b, want)
			continue
		}
		got, err := parseBoundedness(str, b)
		if err != nil || got != c.unbounded {
			t.Errorf("%s: parseBoundedness(%q) = %v, %v; want %v", c.name, str, got, err, c.unbounded)
		}
		if Unbounded(c.col) != c.unbounded {
			t.Errorf("%s: Unbounded = %v", c.name, !c.unbounded)
		}
	}

	// Any other form is refused, and Unbounded panics naming the Beam
	// version.
	b := body(bounded)
	for _, str := range []string{
		"{3: " + b + ":bounded}",
		"{3: " + b + " unbounded}",
		"{3: " + b + "}:unbounded",
		"{x: " + b + "}",
		"{: " + b + "}",
		"3: " + b + "}",
		"PCollection<" + b + ">",
		"{3: " + strings.Replace(b, "/", " ", 1) + ":unbounded}",
		"",
	} {
		if got, err := parseBoundedness(str, b); err == nil {
			t.Errorf("parseBoundedness(%q) = %v, no error", str, got)
		}
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Beam Go "+core.SdkVersion) || !strings.Contains(fmt.Sprint(r), strconv.Quote(str)) {
					t.Errorf("unboundedOf(%q): panic %v, want one naming Beam Go %s and the string", str, r, core.SdkVersion)
				}
			}()
			unboundedOf(str, b)
		}()
	}
}
