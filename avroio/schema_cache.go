package avroio

import (
	"sync"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// maxCachedSchemas bounds every schema cache of the package, as the
// container's cache of writer schemas is bounded: a stream of distinct
// schemas (one per file, say) cannot grow them without end.
const maxCachedSchemas = 256

// boundedCache is a map safe for concurrent use that holds at most max
// entries: adding to a full cache first drops an arbitrary entry.
type boundedCache[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]V
}

func newBoundedCache[K comparable, V any](max int) *boundedCache[K, V] {
	return &boundedCache[K, V]{max: max, m: map[K]V{}}
}

func (c *boundedCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *boundedCache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = v
}

func (c *boundedCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// Parsed schemas by their JSON text, for reader schemas and writer schemas
// of Write: every range of every file of a read, and every DoFn of a
// write, shares one. Each is parsed with a cache of its own, so named
// types of one schema never clash with another's.
var parsedSchemas = newBoundedCache[string, avro.Schema](maxCachedSchemas)

// cachedSchema parses the schema JSON, or returns it parsed before.
func cachedSchema(json string) (avro.Schema, error) {
	if s, ok := parsedSchemas.get(json); ok {
		return s, nil
	}
	s, err := container.ParseSchema(json)
	if err != nil {
		return nil, err
	}
	parsedSchemas.put(json, s)
	return s, nil
}

// cachedReaderSchema is the parsed reader schema of a read.
func cachedReaderSchema(json string) (avro.Schema, error) { return cachedSchema(json) }
