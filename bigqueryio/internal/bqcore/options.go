package bqcore

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sdfio/sdfio/internal/retry"
)

// The options machinery that bigqueryio (Read, Query) and bqwrite (Write)
// share: how a call of an option is noted and repeats refused, the
// process's registry of client options, the connection options of a
// client, table specs, and the one backoff between retries.

// Given is an option as it was given: its name, its call as text for
// messages, and the value two calls are compared by (the call's text
// unless the option says otherwise, see bqwrite.WithSchema).
type Given struct{ Name, Call, Value string }

// Note is the call of the named option with args, for the messages and
// the checks of construction. Every option notes its call: an option given
// twice with different values is then refused (CheckRepeats) with no rule
// of its own. Two calls differ when their text does: an argument that
// holds pointers should be given as text (see bqwrite.WithSchema), so that
// equal values read the same.
func Note(name string, args ...any) Given {
	parts := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			parts[i] = strconv.Quote(a)
		case time.Time:
			parts[i] = a.UTC().Format(time.RFC3339Nano)
		default:
			parts[i] = fmt.Sprint(a)
		}
	}
	call := name + "(" + strings.Join(parts, ", ") + ")"
	return Given{name, call, call}
}

// Calls lists the calls of the named option in given, in order.
func Calls(given []Given, name string) []string {
	var out []string
	for _, g := range given {
		if g.Name == name {
			out = append(out, g.Call)
		}
	}
	return out
}

// RawArg is an argument of Note shown as it is, not quoted.
type RawArg string

// CheckRepeats refuses an option given twice with different values, naming
// both calls: the later would silently replace the earlier. The same call
// repeated, value for value, is accepted (it changes nothing). The options
// named in own have rules of their own for repeats, checked before.
func CheckRepeats(given []Given, own ...string) error {
	first := map[string]Given{}
	for _, g := range given {
		if slices.Contains(own, g.Name) {
			continue
		}
		if f, ok := first[g.Name]; !ok {
			first[g.Name] = g
		} else if f.Value != g.Value {
			return fmt.Errorf("%s and %s are both given: give %s once", f.Call, g.Call, g.Name)
		}
	}
	return nil
}

// ApplyOptions applies opts to c in order; a nil option (a nil interface
// or function, or one isZero calls zero) is refused, naming transform
// ("bigqueryio.Read") and its position, instead of panicking.
func ApplyOptions[C, O any](transform string, c *C, opts []O, apply func(O, *C), isZero func(any) bool) error {
	for i, o := range opts {
		if isNilOption(o) || isZero(o) {
			return fmt.Errorf("%s: option %d of %d is nil (a nil %v)", transform, i+1, len(opts), reflect.TypeFor[O]())
		}
		apply(o, c)
	}
	return nil
}

// isNilOption reports a nil interface or function.
func isNilOption(o any) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Func && v.IsNil()
}

// registered is the process's client options of RegisterClientOptions, by
// name.
var registered struct {
	sync.Mutex
	m map[string]func() []option.ClientOption
}

// RegisterClientOptions registers, under name, a function returning client
// options for the transforms given WithClientOptions(name) (see bigqueryio's):
// credentials, a quota project, headers, interceptors. Call it in an init
// function, so that every worker process registers it too. f is called
// each time one of those transforms makes a client, on the worker that
// makes it; it may return fresh values each time. Registering a name
// again replaces its function.
// RegisterClientOptions panics on an empty name or a nil f.
func RegisterClientOptions(name string, f func() []option.ClientOption) {
	if name == "" || f == nil {
		panic("bigqueryio.RegisterClientOptions: an empty name or a nil function")
	}
	registered.Lock()
	defer registered.Unlock()
	if registered.m == nil {
		registered.m = map[string]func() []option.ClientOption{}
	}
	registered.m[name] = f
}

// RegisteredOptions are the options registered as name in this process
// (none for "").
func RegisteredOptions(name string) ([]option.ClientOption, error) {
	if name == "" {
		return nil, nil
	}
	registered.Lock()
	f := registered.m[name]
	registered.Unlock()
	if f == nil {
		return nil, fmt.Errorf("bigqueryio: WithClientOptions(%q): no client options are registered under that name in this process (call RegisterClientOptions in an init function, so that every worker registers them too)", name)
	}
	return f(), nil
}

// CheckClientOptions checks WithClientOptions' name and WithQuotaProject's
// project when the pipeline is built; last names the option's last call.
func CheckClientOptions(name, quota string, given func(string) bool, last func(string) string) error {
	if given("WithClientOptions") {
		if name == "" {
			return fmt.Errorf("%s: an empty name", last("WithClientOptions"))
		}
		registered.Lock()
		f := registered.m[name]
		registered.Unlock()
		if f == nil {
			return fmt.Errorf("%s: no client options are registered under that name in this process: call RegisterClientOptions in an init function", last("WithClientOptions"))
		}
	}
	if given("WithQuotaProject") && !ValidProject(quota) {
		return fmt.Errorf("%s: not a project id", last("WithQuotaProject"))
	}
	return nil
}

// ConnOptions are the client options of a connection to endpoint (the
// service's when ""), without TLS and credentials when insecure, with the
// quota project and the options registered as named last.
func ConnOptions(endpoint string, insecureConn, grpcConn bool, quota, named string) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	if insecureConn {
		opts = append(opts, option.WithoutAuthentication())
		if grpcConn {
			opts = append(opts, option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
		}
	}
	if quota != "" {
		opts = append(opts, option.WithQuotaProject(quota))
	}
	extra, err := RegisteredOptions(named)
	if err != nil {
		return nil, err
	}
	return append(opts, extra...), nil
}

// TableResource turns project.dataset.table or project:dataset.table into
// projects/p/datasets/d/tables/t. The project may be domain-scoped
// (example.com:project), as in example.com:project:dataset.table or
// example.com:project.dataset.table.
func TableResource(name string) (string, error) {
	proj, ds, tbl, err := SplitTableSpec(name)
	if err != nil {
		return "", fmt.Errorf("bigqueryio: %w", err)
	}
	return fmt.Sprintf("projects/%s/datasets/%s/tables/%s", proj, ds, tbl), nil
}

// SplitTableSpec splits a table spec into its project, dataset and table. A
// dataset or table id has no '.', ':' or '/'; so the table is what follows
// the last '.', the dataset what follows the last ':' or '.' before it, and
// the project the rest: a plain id, or a domain-scoped one (domain:id, the
// domain alone holding dots).
func SplitTableSpec(name string) (project, dataset, table string, err error) {
	bad := func() (string, string, string, error) {
		return "", "", "", fmt.Errorf("table %q: want project.dataset.table or project:dataset.table (the project may be domain-scoped, example.com:project)", name)
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return bad()
	}
	rest, table := name[:i], name[i+1:]
	j := strings.LastIndexAny(rest, ".:")
	if j < 0 {
		return bad()
	}
	project, dataset = rest[:j], rest[j+1:]
	if !ValidProject(project) || dataset == "" || table == "" || strings.ContainsAny(dataset, "/") || strings.ContainsAny(table, ":/") {
		return bad()
	}
	return project, dataset, table, nil
}

// ValidProject accepts a project id (no '.', ':' or '/') or a domain-scoped
// one, domain:id, the domain holding no ':' or '/'.
func ValidProject(p string) bool {
	domain, id, scoped := strings.Cut(p, ":")
	if !scoped {
		id = domain
	} else if domain == "" || strings.ContainsAny(domain, "/") {
		return false
	}
	return id != "" && !strings.ContainsAny(id, ".:/")
}

// RetryBackoff is the one backoff between retries of a call (reads,
// appends, finalize, flush, commit, stream creation, staging table
// deletion), internal/retry's: n retries (WithRetries), from base
// doubling, at most 10 s apart, each wait drawn at random up to its bound;
// a base of 0 retries without waiting.
func RetryBackoff(n int, base time.Duration) retry.Backoff {
	return retry.Backoff{Retries: n, Initial: base, Max: 10 * time.Second, Multiplier: 2}
}

// Must is v, panicking with err if it is not nil: Read, Query and Write
// are their Try forms panicking where those return an error.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// FuncName is the name of fn, a function, for messages.
func FuncName(fn any) string {
	if v := reflect.ValueOf(fn); v.Kind() == reflect.Func && !v.IsNil() {
		if f := runtime.FuncForPC(v.Pointer()); f != nil {
			return f.Name()
		}
	}
	return fmt.Sprintf("%T", fn)
}
