package bqwrite

import (
	"context"
	"fmt"
	"sync"

	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/types/descriptorpb"
)

// MaxDefaultStreamConnections is the most AppendRows connections the
// WithAtLeastOnce writes of one worker process keep open to the service
// (per destination region and endpoint), whatever the number of tables,
// bundles and DoFn instances: they share one Storage Write API client
// per process that multiplexes the tables' _default streams over them
// (managedwriter's connection sharing, which the service allows on
// _default streams only), opening more of them, up to this many, as the
// traffic needs. The service limits the open connections of a project;
// exactly-once writes, whose PENDING streams cannot be shared, open one
// per bundle and table instead.
const MaxDefaultStreamConnections = 4

// sharedWriters is the process's multiplexing clients of at-least-once
// writes, one per endpoint and project. It is made on first use; a client
// is closed when the last DoFn instance using it is torn down.
var sharedWriters = struct {
	mu      sync.Mutex
	clients map[sharedKey]*sharedClient
}{clients: map[sharedKey]*sharedClient{}}

type sharedKey struct {
	endpoint, project string
	insecure          bool
	// quota and options are WithQuotaProject's and WithClientOptions':
	// writes given other options get clients of their own.
	quota, options string
}

// sharedClient is a multiplexing client and how many DoFn instances use
// it.
type sharedClient struct {
	key   sharedKey
	mw    *managedwriter.Client
	users int
}

// acquireShared returns the process's multiplexing client for cfg's
// endpoint and project, made if there is none, counting one more user.
func acquireShared(cfg writeConfig, project string) (*sharedClient, error) {
	key := sharedKey{endpoint: cfg.Endpoint, project: project, insecure: cfg.Insecure, quota: cfg.QuotaProject, options: cfg.ClientOptions}
	sharedWriters.mu.Lock()
	defer sharedWriters.mu.Unlock()
	c := sharedWriters.clients[key]
	if c == nil {
		// The client's context outlives bundles: it carries the shared
		// connections' background work.
		mw, err := newManagedWriter(context.Background(), cfg, project, managedwriter.WithMultiplexing(), managedwriter.WithMultiplexPoolLimit(MaxDefaultStreamConnections))
		if err != nil {
			return nil, err
		}
		c = &sharedClient{key: key, mw: mw}
		sharedWriters.clients[key] = c
	}
	c.users++
	return c, nil
}

// newManagedWriter is a Storage Write API client of project with cfg's
// client options and more.
func newManagedWriter(ctx context.Context, cfg writeConfig, project string, more ...option.ClientOption) (*managedwriter.Client, error) {
	opts, err := cfg.clientOptions()
	if err != nil {
		return nil, err
	}
	mw, err := managedwriter.NewClient(ctx, project, append(opts, more...)...)
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: creating the Storage Write client of project %s: %w", project, err)
	}
	return mw, nil
}

// release counts one user fewer, and closes the client after the last.
func (c *sharedClient) release() {
	sharedWriters.mu.Lock()
	defer sharedWriters.mu.Unlock()
	if c.users--; c.users > 0 {
		return
	}
	delete(sharedWriters.clients, c.key)
	c.mw.Close()
}

// keptWriter is a _default stream writer a DoFn instance keeps for its
// life (WithAtLeastOnce), and the writer schema it last sent.
type keptWriter struct {
	ms   *managedwriter.ManagedStream
	desc *descriptorpb.DescriptorProto
}

// defaultWriter is the writer of d's table's _default stream of this DoFn
// instance: one per table for the instance's life, attached to the
// process's shared connections (so not closed when a bundle ends).
func (f *appendFn) defaultWriter(d *destination) (*managedwriter.ManagedStream, *descriptorpb.DescriptorProto, error) {
	if w, ok := f.kept[d.res]; ok {
		return w.ms, w.desc, nil
	}
	ms, err := f.mw.NewManagedStream(context.Background(), managedwriter.WithDestinationTable(d.res),
		managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(d.table.enc.desc))
	if err != nil {
		return nil, nil, fmt.Errorf("bqwrite.Write to %s: opening its _default stream: %w", d.table.spec, err)
	}
	if f.kept == nil {
		f.kept = map[string]*keptWriter{}
	}
	f.kept[d.res] = &keptWriter{ms: ms, desc: d.table.enc.desc}
	return ms, d.table.enc.desc, nil
}

// keep records, when a bundle ends, the writer schema d's kept writer
// sent last.
func (f *appendFn) keep(d *destination) bool {
	w, ok := f.kept[d.res]
	if ok && w.ms == d.ms {
		w.desc = d.desc
	}
	return ok
}

// closeKept closes the instance's kept writers and lets go of the shared
// client.
func (f *appendFn) closeKept() {
	for _, w := range f.kept {
		w.ms.Close()
	}
	f.kept = nil
	if f.shared != nil {
		f.shared.release()
		f.shared, f.mw = nil, nil
	}
}
