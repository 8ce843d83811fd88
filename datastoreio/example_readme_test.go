package datastoreio_test

// The README's datastoreio snippets, compiled (they need a real project or
// an emulator to run; the emulator tests of this package run the same
// calls). internal/readme checks that README.md quotes this file verbatim.

import (
	"reflect"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/datastoreio"
)

type Task struct {
	K    *datastore.Key `datastore:"__key__"` // the entity's full key
	Done bool
	Note string `datastore:",noindex"`
}

func init() { datastoreio.RegisterType(reflect.TypeOf((*Task)(nil)).Elem()) }

// Read the open tasks of namespace "prod", split as the statistics say, and
// write them back; then delete a set of keys.
func Example_readme() {
	p, s := beam.NewPipelineWithRoot()
	// An Option (WithDatabase, WithClientOptions, WithMetricsNamespace)
	// serves reads and writes; the others serve one side.
	db := datastoreio.WithDatabase("")

	q := datastoreio.NewQuery("Task").Filter("Done", "=", false) // or datastoreio.GQL("SELECT * FROM Task")
	tasks := datastoreio.Read(s, "my-project", q, reflect.TypeOf(Task{}), db,
		datastoreio.WithNamespace("prod"), datastoreio.WithNumQuerySplits(0)) // 0: from the statistics

	datastoreio.Write(s, "my-project", tasks, db, datastoreio.WithHintNumWorkers(10))
	keys := beam.Create(s, datastore.NameKey("Task", "stale", nil))
	datastoreio.DeleteKey(s, "my-project", keys, db) // PCollection<*datastore.Key>
	_ = p
}
