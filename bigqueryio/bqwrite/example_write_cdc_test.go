package bqwrite_test

// The README's CDC snippet, compiled and run against bqtest.

import (
	"context"
	"fmt"
	"log"
	"reflect"
	"sort"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// Account is a row of a table kept in sync with a source database by its
// change log.
type Account struct {
	ID      int64  `bigquery:"id"`
	Owner   string `bigquery:"owner"`
	Balance int64  `bigquery:"balance"`
	LSN     int64  `bigquery:"lsn"`     // the change's position in the source's log
	Deleted bool   `bigquery:"deleted"` // the change deletes the account
}

func init() {
	beam.RegisterType(reflect.TypeFor[Account]())
	register.Function1x1(accountChange)
}

// accountChange is how a change applies: an upsert or a delete of the row
// with its primary key, ordered by the log position.
func accountChange(a Account) bqwrite.RowMutation {
	typ := bqwrite.Upsert
	if a.Deleted {
		typ = bqwrite.Delete
	}
	return bqwrite.RowMutation{Type: typ, SequenceNumber: bqwrite.SequenceNumber(uint64(a.LSN))}
}

// Apply a change log to a table by primary key (CDC), against bqtest.
func Example_writeCDC() {
	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	changes := beam.Create(s,
		Account{ID: 1, Owner: "ana", Balance: 10, LSN: 1},
		Account{ID: 2, Owner: "bo", Balance: 5, LSN: 2},
		Account{ID: 1, Owner: "ana", Balance: 25, LSN: 4},
		Account{ID: 1, Owner: "ana", Balance: 15, LSN: 3}, // older than LSN 4: ignored
		Account{ID: 2, Deleted: true, LSN: 5})
	bqwrite.Write(s, "p.d.accounts", changes,
		bqwrite.WithAtLeastOnce(),              // CDC goes through the _default stream
		bqwrite.WithRowMutation(accountChange), // UPSERT or DELETE, and its order
		bqwrite.WithPrimaryKey("id"),           // the key CreateIfNeeded makes the table with
		bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithInsecure())
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	rows, _ := srv.TableRows("p.d.accounts")
	sort.Slice(rows, func(i, j int) bool { return rows[i][0].(int64) < rows[j][0].(int64) })
	for _, r := range rows {
		fmt.Println(r[0], r[1], r[2])
	}
	// Output: 1 ana 25
}
