package bigqueryio_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"golang.org/x/oauth2"
	"google.golang.org/api/option"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqquery"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

// testClientOptions is the name the tests' client options are registered
// under, in init: every worker process registers them too. They hold a
// quota project, a request reason and tlsAuth's options.
const testClientOptions = "sdfio-test-headers"

// tlsAuthOptions is the name of tlsAuth's options alone.
const tlsAuthOptions = "sdfio-test-tls"

// caEnv holds the PEM certificate of the test's WithTLS server; a worker
// process inherits it.
const caEnv = "SDFIO_BIGQUERYIO_TEST_CA"

func init() {
	bigqueryio.RegisterClientOptions(testClientOptions, func() []option.ClientOption {
		return append(tlsAuth(), option.WithQuotaProject("opts-quota"), option.WithRequestReason("sdfio-test"))
	})
	bigqueryio.RegisterClientOptions(tlsAuthOptions, tlsAuth)
}

// tlsAuth are the options of a client of the WithTLS server whose
// certificate is in caEnv: trust it, and send a static token. Google's
// gRPC clients send the quota project and the request reason with the
// credentials of a call, hence only over TLS.
func tlsAuth() []option.ClientOption {
	if os.Getenv(caEnv) == "" {
		return nil // a test without a WithTLS server
	}
	tlsOpt, err := bqtest.TLSOption([]byte(os.Getenv(caEnv)))
	if err != nil {
		panic(fmt.Sprintf("%s: %v", caEnv, err))
	}
	return []option.ClientOption{tlsOpt, option.WithTokenSource(oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "test-token"}))}
}

// headerServer is a WithTLS server that records the quota project,
// request reason and authorization headers of every call, with the events
// table of n rows in p.d and the query evenSQL over it; it returns the
// query's rows. Its certificate is put in caEnv for the test.
func headerServer(t *testing.T, n int) (*bqtest.Server, [][]bigquery.Value) {
	t.Helper()
	srv, even := queryServer(t, n, bqtest.WithTLS(), bqtest.WithHeaderLog("x-goog-user-project", "x-goog-request-reason", "authorization"))
	t.Setenv(caEnv, string(srv.CACert()))
	return srv, even
}

// tlsCommon are the options of every transform of the tests with a
// headerServer: its endpoints (over TLS for gRPC, not WithInsecure, which
// drops credentials), fast retries and more.
func tlsCommon(srv *bqtest.Server, more ...both) []both {
	return append([]both{{bigqueryio.WithEndpoint(srv.Addr()), bqwrite.WithEndpoint(srv.Addr())},
		{bigqueryio.WithRetries(8, 5*time.Millisecond), bqwrite.WithRetries(8, 5*time.Millisecond)}}, more...)
}

// both is one option as the read side (Read, Query) and Write take it.
type both struct {
	r bigqueryio.SessionOption
	w bqwrite.WriteOption
}

func clientOpts(name string) both {
	return both{bigqueryio.WithClientOptions(name), bqwrite.WithClientOptions(name)}
}

func quotaProject(p string) both {
	return both{bigqueryio.WithQuotaProject(p), bqwrite.WithQuotaProject(p)}
}

func tlsRead(srv *bqtest.Server, more ...both) []bigqueryio.ReadOption {
	opts := []bigqueryio.ReadOption{bigqueryio.WithSelectedFields("id", "score", "kind"), bigqueryio.WithRowRestriction(restriction)}
	for _, o := range tlsCommon(srv, more...) {
		opts = append(opts, o.r)
	}
	return opts
}

func tlsQuery(srv *bqtest.Server, more ...both) []bigqueryio.QueryOption {
	opts := []bigqueryio.QueryOption{bigqueryio.WithSelectedFields("id", "score", "kind"), bigqueryio.WithRowRestriction(restriction),
		bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()), bigqueryio.WithBillingProject("bill")}
	for _, o := range tlsCommon(srv, more...) {
		opts = append(opts, o.r)
	}
	return opts
}

func tlsWrite(srv *bqtest.Server, more ...both) []bqwrite.WriteOption {
	opts := []bqwrite.WriteOption{bqwrite.WithRESTEndpoint(srv.RESTEndpoint())}
	for _, o := range tlsCommon(srv, more...) {
		opts = append(opts, o.w)
	}
	return opts
}

// checkHeaders checks that srv received calls of every API in apis
// ("read" for the Storage Read API, "write" for the Storage Write API,
// "rest" for the REST API) and of no other, and that every call carried
// the headers of want (canonical names).
func checkHeaders(t *testing.T, srv *bqtest.Server, want map[string]string, apis ...string) {
	t.Helper()
	calls := srv.Calls()
	seen := map[string]int{}
	bad := 0
	for _, c := range calls {
		api := c.API
		switch {
		case api == "grpc" && strings.Contains(c.Method, ".BigQueryRead/"):
			api = "read"
		case api == "grpc" && strings.Contains(c.Method, ".BigQueryWrite/"):
			api = "write"
		}
		seen[api]++
		for h, v := range want {
			if got := c.Header.Values(h); !slices.Equal(got, []string{v}) {
				if bad++; bad <= 5 {
					t.Errorf("%s call %s: header %s is %q, want %q", c.API, c.Method, h, got, v)
				}
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d calls in all without the headers", bad)
	}
	var got []string
	for api := range seen {
		got = append(got, api)
	}
	slices.Sort(got)
	slices.Sort(apis)
	if !slices.Equal(got, apis) {
		t.Errorf("calls of the APIs %v (%v), want of %v", got, seen, apis)
	}
}

var registeredHeaders = map[string]string{"X-Goog-User-Project": "opts-quota", "X-Goog-Request-Reason": "sdfio-test", "Authorization": "Bearer test-token"}

// TestClientOptionsReachClients is issue 38's proof of WithClientOptions:
// the options registered under its name (a quota project and a request
// reason) reach every client of Read (Storage Read), Query (Storage Read
// and REST) and Write (Storage Write and REST), in its exactly-once,
// at-least-once and unbounded writes: every call the server receives
// carries their headers.
func TestClientOptionsReachClients(t *testing.T) {
	named := clientOpts(testClientOptions)
	t.Run("Read", func(t *testing.T) {
		srv, _ := headerServer(t, 500)
		rows, err := srv.TableRows("p.d.events")
		if err != nil {
			t.Fatal(err)
		}
		p, s := beam.NewPipelineWithRoot()
		col := bigqueryio.Read(s, "p.d.events", reflect.TypeFor[Event](), append(tlsRead(srv, named), bigqueryio.WithMaxStreams(2))...)
		passert.Equals(s, fingerprintOf(s, col), expected(rows))
		run(t, p)
		checkHeaders(t, srv, registeredHeaders, "read")
	})
	t.Run("Query", func(t *testing.T) {
		srv, even := headerServer(t, 500)
		p, s := beam.NewPipelineWithRoot()
		col := bqquery.Query(s, evenSQL, reflect.TypeFor[Event](), tlsQuery(srv, named)...)
		passert.Equals(s, fingerprintOf(s, col), expected(even))
		run(t, p)
		checkHeaders(t, srv, registeredHeaders, "read", "rest")
	})
	for _, mode := range []string{"exactly once", "at least once", "unbounded"} {
		t.Run("Write "+mode, func(t *testing.T) {
			srv, _ := headerServer(t, 0)
			const n = 50
			p, s := beam.NewPipelineWithRoot()
			opts := tlsWrite(srv, named)
			var col beam.PCollection
			switch mode {
			case "unbounded":
				start := time.Now()
				col = beam.ParDo(s, seqSimple, periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*10*time.Millisecond), 10*time.Millisecond))))
				opts = append(opts, bqwrite.WithTriggeringFrequency(200*time.Millisecond))
			case "at least once":
				col = beam.Create(s, anys(simpleRows(n))...)
				opts = append(opts, bqwrite.WithAtLeastOnce())
			default:
				col = beam.Create(s, anys(simpleRows(n))...)
			}
			res := bqwrite.Write(s, "p.d.out", col, opts...)
			passert.Empty(s, res.FailedRows)
			run(t, p)
			checkOnce(t, srv, "p.d.out", n)
			checkHeaders(t, srv, registeredHeaders, "write", "rest")
		})
	}
}

// TestQuotaProject: WithQuotaProject's project reaches the Storage Read and
// REST clients of Query and the Storage Write and REST clients of Write as
// x-goog-user-project.
func TestQuotaProject(t *testing.T) {
	srv, even := headerServer(t, 100)
	quota := map[string]string{"X-Goog-User-Project": "my-quota", "Authorization": "Bearer test-token"}
	opts := []both{quotaProject("my-quota"), clientOpts(tlsAuthOptions)}
	p, s := beam.NewPipelineWithRoot()
	col := bqquery.Query(s, evenSQL, reflect.TypeFor[Event](), tlsQuery(srv, opts...)...)
	res := bqwrite.Write(s, "p.d.copy", col, tlsWrite(srv, opts...)...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	if rows, err := srv.TableRows("p.d.copy"); err != nil || int64(len(rows)) != expected(even).N {
		t.Errorf("p.d.copy holds %d rows (%v), want %d", len(rows), err, expected(even).N)
	}
	checkHeaders(t, srv, quota, "read", "write", "rest")
}

// TestClientOptionsSeparateWorker runs a Query into a Write with
// WithClientOptions on SDK workers in separate processes: each worker
// makes the options from its own registration (in init), and every call of
// the Storage Read, Storage Write and REST clients carries them.
func TestClientOptionsSeparateWorker(t *testing.T) {
	srv, even := headerServer(t, 200)
	named := clientOpts(testClientOptions)
	p, s := beam.NewPipelineWithRoot()
	col := bqquery.Query(s, evenSQL, reflect.TypeFor[Event](), tlsQuery(srv, named)...)
	res := bqwrite.Write(s, "p.d.copy", col, tlsWrite(srv, named)...)
	passert.Empty(s, res.FailedRows)
	wr, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate worker processes failed: %v", err)
	}
	checkSeparate(t, wr)
	if rows, err := srv.TableRows("p.d.copy"); err != nil || int64(len(rows)) != expected(even).N {
		t.Errorf("p.d.copy holds %d rows (%v), want %d", len(rows), err, expected(even).N)
	}
	checkHeaders(t, srv, registeredHeaders, "read", "write", "rest")
}

// checkSeparate checks that the workers of wr ran in processes of their
// own.
func checkSeparate(t *testing.T, wr *workertest.Result) {
	t.Helper()
	if len(wr.Workers) == 0 {
		t.Fatal("no worker process was started")
	}
	for _, w := range wr.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran as pid %d, want a separate process", w.ID, w.PID)
		}
	}
}

// TestClientOptionsNotOnWorker: options registered after the process
// started (here in the test, as a program's main would) are not on a
// worker process, which fails the pipeline naming the option and
// RegisterClientOptions.
func TestClientOptionsNotOnWorker(t *testing.T) {
	bigqueryio.RegisterClientOptions("registered-in-main", func() []option.ClientOption { return nil })
	srv := newServer(t)
	eventsTable(t, srv, 100)
	p, s := beam.NewPipelineWithRoot()
	bigqueryio.Read(s, "p.d.events", reflect.TypeFor[Event](), readOpts(srv, bigqueryio.WithClientOptions("registered-in-main"))...)
	wr, err := workertest.Run(t, p) // not RunFailing: its LOOPBACK without -race has the options
	checkSeparate(t, wr)
	if err == nil || !strings.Contains(err.Error(), `WithClientOptions("registered-in-main")`) || !strings.Contains(err.Error(), "RegisterClientOptions") {
		t.Fatalf("pipeline error %v, want one naming the unregistered options", err)
	}
}

// TestClientOptionsConstruction: a name not registered, an empty name, a
// malformed quota project and two different names are refused when the
// pipeline is built, by Read, Query and Write alike.
func TestClientOptionsConstruction(t *testing.T) {
	for _, tc := range []struct {
		opts []both
		want string
	}{
		{[]both{clientOpts("nobody")}, `WithClientOptions("nobody"): no client options are registered under that name in this process: call RegisterClientOptions in an init function`},
		{[]both{clientOpts("")}, `WithClientOptions(""): an empty name`},
		{[]both{quotaProject("")}, `WithQuotaProject(""): not a project id`},
		{[]both{quotaProject("a.b")}, `WithQuotaProject("a.b"): not a project id`},
		{[]both{clientOpts(testClientOptions), clientOpts("other")},
			fmt.Sprintf(`WithClientOptions(%q) and WithClientOptions("other") are both given`, testClientOptions)},
	} {
		s := beam.NewPipeline().Root()
		var ro []bigqueryio.ReadOption
		var qo []bigqueryio.QueryOption = []bigqueryio.QueryOption{bigqueryio.WithBillingProject("b")}
		var wo []bqwrite.WriteOption
		for _, o := range tc.opts {
			ro, qo, wo = append(ro, o.r), append(qo, o.r), append(wo, o.w)
		}
		_, rerr := bigqueryio.TryRead(s, "p.d.t", reflect.TypeFor[Event](), ro...)
		_, qerr := bqquery.TryQuery(s, "SELECT 1", reflect.TypeFor[Event](), qo...)
		_, werr := bqwrite.TryWrite(s, "p.d.t", beam.Create(s, Simple{}), wo...)
		for what, err := range map[string]error{"Read": rerr, "Query": qerr, "Write": werr} {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s with %d options: error %v, want %q", what, len(tc.opts), err, tc.want)
			}
		}
	}
	s := beam.NewPipeline().Root()
	if _, err := bigqueryio.TryRead(s, "p.d.t", reflect.TypeFor[Event](), bigqueryio.WithClientOptions(testClientOptions), bigqueryio.WithQuotaProject("q")); err != nil {
		t.Errorf("TryRead with registered options and a quota project: %v", err)
	}
}
