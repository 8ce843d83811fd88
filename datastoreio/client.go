package datastoreio

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/api/option"
	gtransport "google.golang.org/api/transport/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/sdfio/sdfio/internal/retry"
)

// prodEndpoint is Cloud Datastore's gRPC endpoint.
const prodEndpoint = "datastore.googleapis.com:443"

var clientOptions struct {
	sync.Mutex
	m map[string]func() []option.ClientOption
}

// RegisterClientOptions registers, under name, a function returning extra
// options for the clients a Read creates (credentials, an endpoint, gRPC
// interceptors). A Read uses them when given WithClientOptions(name). Client
// options do not serialise, so they are named: call RegisterClientOptions in
// an init function, so that every worker of the pipeline has them.
func RegisterClientOptions(name string, f func() []option.ClientOption) {
	clientOptions.Lock()
	defer clientOptions.Unlock()
	if clientOptions.m == nil {
		clientOptions.m = map[string]func() []option.ClientOption{}
	}
	clientOptions.m[name] = f
}

func registeredOptions(name string) ([]option.ClientOption, error) {
	if name == "" {
		return nil, nil
	}
	clientOptions.Lock()
	f := clientOptions.m[name]
	clientOptions.Unlock()
	if f == nil {
		return nil, fmt.Errorf("datastoreio: no client options registered as %q on this worker (call RegisterClientOptions in an init function)", name)
	}
	return f(), nil
}

// conn holds the clients of one project and database: the official client
// (entities into structs, through its iterator and cursors) and the gRPC
// client of the same connection (GQL, scatter and statistics queries, where
// the answer's read time and raw keys are needed).
type conn struct {
	project, database string
	client            *datastore.Client
	raw               pb.DatastoreClient
	md                metadata.MD
	gc                *grpc.ClientConn
	m                 *readMetrics
}

// dial connects to project/database: to the emulator named by
// DATASTORE_EMULATOR_HOST when that is set (as the official client does),
// otherwise to Cloud Datastore with the default credentials. extra are
// appended last. Its queries count in the read metrics of namespace
// metrics.
func dial(ctx context.Context, project, database, metrics string, extra []option.ClientOption) (*conn, error) {
	m := newReadMetrics(metrics)
	var opts []option.ClientOption
	if host := os.Getenv("DATASTORE_EMULATOR_HOST"); host != "" {
		host = regexp.MustCompile("^(http://|https://)").ReplaceAllString(host, "")
		if !strings.Contains(host, "://") {
			host = "passthrough:///" + host
		}
		opts = append(opts,
			option.WithEndpoint(host),
			option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	} else {
		opts = append(opts, option.WithEndpoint(prodEndpoint), option.WithScopes(datastore.ScopeDatastore))
	}
	opts = append(opts, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(m.meter)))
	opts = append(opts, extra...)
	gc, err := gtransport.Dial(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("datastoreio: connecting to project %s: %w", project, err)
	}
	client, err := datastore.NewClientWithDatabase(ctx, project, database, option.WithGRPCConn(gc))
	if err != nil {
		gc.Close()
		return nil, fmt.Errorf("datastoreio: client of project %s database %q: %w", project, database, err)
	}
	params := "project_id=" + url.QueryEscape(project)
	prefix := "projects/" + url.QueryEscape(project)
	if database != "" {
		params += "&database_id=" + url.QueryEscape(database)
		prefix += "/databases/" + url.QueryEscape(database)
	}
	return &conn{
		project: project, database: database, client: client,
		raw: pb.NewDatastoreClient(gc), gc: gc, m: m,
		md: metadata.Pairs("x-goog-request-params", params, "google-cloud-resource-prefix", prefix),
	}, nil
}

func (c *conn) close() {
	c.client.Close()
	c.gc.Close()
}

// rawContext adds the routing headers a direct gRPC call needs.
func (c *conn) rawContext(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.Join(c.md))
}

// readOptions is the read time of a request (nil: the latest data).
func readOptions(readTime time.Time) *pb.ReadOptions {
	if readTime.IsZero() {
		return nil
	}
	return &pb.ReadOptions{ConsistencyType: &pb.ReadOptions_ReadTime{ReadTime: timestampProto(readTime)}}
}

// meter, a gRPC interceptor, counts the pages (RunQuery responses) and
// entity bytes of every query in the Beam metrics of the calling bundle.
func (m *readMetrics) meter(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := reply.(*pb.RunQueryResponse); ok && err == nil && r.Batch != nil {
		m.pages.Inc(ctx, 1)
		var n int
		for _, e := range r.Batch.EntityResults {
			n += proto.Size(e.Entity)
		}
		m.bytes.Inc(ctx, int64(n))
	}
	return err
}

// readRetries is how a read's queries (RunQuery, idempotent) retry the
// errors internal/retry's rule calls transient: at most 7 retries in a
// row, waiting by its backoff from 100 ms doubling up to 30 s, each wait
// drawn at random up to it.
var readRetries = retry.Backoff{Retries: 7, Initial: 100 * time.Millisecond, Max: 30 * time.Second, Multiplier: 2, Sleep: retry.Sleep}
