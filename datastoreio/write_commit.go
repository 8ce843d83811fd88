package datastoreio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sdfio/sdfio/internal/retry"
)

// Defaults of the commit retries, as in Beam Java's DatastoreV1 writer.
const (
	DefaultMaxCommitRetries = 5
	DefaultInitialBackoff   = 5 * time.Second
	maxBackoff              = 2 * time.Minute
)

// commitBackoff is the backoff of a commit's (or an allocation's)
// retries, internal/retry's: maxRetries retries (WithCommitRetries), from
// initial growing 1.5 times each retry up to maxBackoff, each wait drawn
// at random up to it, slept by sleep; no wait when initial is 0.
func commitBackoff(maxRetries int, initial time.Duration, sleep func(context.Context, time.Duration) error) retry.Backoff {
	return retry.Backoff{Retries: maxRetries, Initial: initial, Max: max(initial, maxBackoff), Multiplier: 1.5, Sleep: sleep}
}

// sizer measures the encoded size of a mutation exactly as the client
// would send it: it runs the official client's Mutate against a connection
// whose interceptor captures the CommitRequest and never sends it. The
// entity is converted by the client's own code (struct tags, nested
// structs, PropertyLoadSaver), so the size is the proto size of the very
// mutation the commit carries, and a value the client cannot convert fails
// here, on its own element, rather than in a commit of 500.
type sizer struct {
	client *datastore.Client
}

type captureKey struct{}

// errCaptured ends a sizing call once the request was captured.
var errCaptured = errors.New("datastoreio: request captured for sizing")

func captureCommit(ctx context.Context, method string, req, _ any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, _ ...grpc.CallOption) error {
	slot, _ := ctx.Value(captureKey{}).(*[]*pb.Mutation)
	creq, ok := req.(*pb.CommitRequest)
	if slot == nil || !ok {
		return status.Errorf(codes.Internal, "datastoreio: sizing connection got an unexpected call %s", method)
	}
	*slot = creq.Mutations
	return errCaptured
}

var theSizer struct {
	once sync.Once
	s    *sizer
	err  error
}

// processSizer returns the process's sizer, made on first use.
func processSizer() (*sizer, error) {
	theSizer.once.Do(func() {
		conn, err := grpc.NewClient("passthrough:///datastoreio-sizer.invalid",
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithUnaryInterceptor(captureCommit))
		if err != nil {
			theSizer.err = fmt.Errorf("datastoreio: sizing connection: %w", err)
			return
		}
		c, err := datastore.NewClient(context.Background(), "datastoreio-sizer",
			option.WithGRPCConn(conn), option.WithoutAuthentication())
		if err != nil {
			theSizer.err = fmt.Errorf("datastoreio: sizing client: %w", err)
			return
		}
		theSizer.s = &sizer{client: c}
	})
	return theSizer.s, theSizer.err
}

// size returns the encoded size in bytes of mutation m, or the client's
// error converting it.
func (s *sizer) size(ctx context.Context, m *datastore.Mutation) (int64, error) {
	var muts []*pb.Mutation
	_, err := s.client.Mutate(context.WithValue(ctx, captureKey{}, &muts), m)
	if !errors.Is(err, errCaptured) {
		var me datastore.MultiError
		if errors.As(err, &me) && len(me) == 1 && me[0] != nil {
			err = me[0]
		}
		return 0, err
	}
	if len(muts) != 1 {
		return 0, fmt.Errorf("datastoreio: sizing captured %d mutations, want 1", len(muts))
	}
	return int64(proto.Size(muts[0])), nil
}

// keyString is an unambiguous identity of a complete key, namespace
// included, for the rule that one commit never holds two mutations of the
// same key; "" for an incomplete key.
func dedupKey(k *datastore.Key) string {
	if k == nil || k.Incomplete() {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(k.Namespace)))
	b.WriteByte(':')
	b.WriteString(k.Namespace)
	var path func(*datastore.Key)
	path = func(k *datastore.Key) {
		if k.Parent != nil {
			path(k.Parent)
		}
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(len(k.Kind)))
		b.WriteByte(':')
		b.WriteString(k.Kind)
		if k.Name != "" {
			b.WriteString("n")
			b.WriteString(strconv.Itoa(len(k.Name)))
			b.WriteByte(':')
			b.WriteString(k.Name)
		} else {
			b.WriteString("i")
			b.WriteString(strconv.FormatInt(k.ID, 10))
		}
	}
	path(k)
	return b.String()
}

// describeKey names a key for an error message: namespace, kind and the
// key's path.
func describeKey(k *datastore.Key) string {
	if k == nil {
		return "a nil key"
	}
	ns := k.Namespace
	if ns == "" {
		ns = "(default)"
	}
	return fmt.Sprintf("namespace %s, kind %s, key %s", ns, k.Kind, pathString(k))
}

// keyPath is the key's path, ancestors first: Kind,id or Kind,"name".
func pathString(k *datastore.Key) string {
	var parts []string
	for ; k != nil; k = k.Parent {
		var p string
		switch {
		case k.Name != "":
			p = k.Kind + "," + strconv.Quote(k.Name)
		case k.ID != 0:
			p = k.Kind + "," + strconv.FormatInt(k.ID, 10)
		default:
			p = k.Kind + ",(incomplete)"
		}
		parts = append(parts, p)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}
