package container

import (
	"container/list"
	"io"
	"sync"
)

// FileVersion identifies one version of a file for a HeaderCache: a cached
// header is used only for the same version.
type FileVersion struct {
	// Name is the file's full path; errors name the file by it.
	Name string
	// Size is the file's size in bytes, -1 if unknown.
	Size int64
	// Version is whatever else the caller knows that changes when the
	// file does: a modification time, an object generation, an ETag; ""
	// when it knows nothing more.
	Version string
}

// HeaderCache keeps the parsed headers of recently opened files, so that
// the readers of the many ranges one file is split into (initially, and by
// the runner's dynamic splits) parse its header once per process rather
// than once per range, and a hostile header that is costly to parse is
// parsed once at a time: concurrent opens of one file version wait for the
// first to parse it.
//
// A header is reused only after the 16 bytes just before its end in the
// file are found to be its sync marker (a random 16 bytes per file), read
// from the same stream the reader goes on with, so a file replaced by
// another under the same FileVersion has its header read again rather than
// being read with a stale one.
//
// The cache is bounded in entries and in bytes (a header's size in the
// file plus a per-entry overhead for its metadata); the least recently used
// headers go first. A HeaderCache is safe for concurrent use.
type HeaderCache struct {
	maxEntries int
	maxBytes   int64

	mu       sync.Mutex
	bytes    int64
	lru      list.List // of *cachedHeader, most recently used first
	entries  map[FileVersion]*list.Element
	inflight map[FileVersion]chan struct{}

	parses int64 // headers parsed through the cache, for tests
}

type cachedHeader struct {
	v    FileVersion
	h    *Header
	cost int64
}

// Headers is the process's header cache, which avroio's reads use: up to
// 1024 headers and 64 MiB.
var Headers = NewHeaderCache(1024, 64<<20)

// NewHeaderCache returns a cache of at most maxEntries headers costing at
// most maxBytes together. A header costing more than maxBytes is not kept.
func NewHeaderCache(maxEntries int, maxBytes int64) *HeaderCache {
	return &HeaderCache{
		maxEntries: max(maxEntries, 1),
		maxBytes:   maxBytes,
		entries:    map[FileVersion]*list.Element{},
		inflight:   map[FileVersion]chan struct{}{},
	}
}

// headerCost is what a cached header holds in memory, about: its bytes, and
// for each metadata entry a map slot, a string and a slice header.
func headerCost(h *Header) int64 {
	return h.Size + int64(len(h.Meta))*96 + int64(len(h.Schema))
}

// fits reports whether h is within lim, so a reader with these limits may
// use it: a header parsed under larger limits is parsed again (and
// refused) under smaller ones.
func (h *Header) fits(lim Limits) bool {
	return h.Size <= lim.MaxAlloc && len(h.Meta) <= lim.MaxHeaderEntries && int64(len(h.Meta[MetaSchema])) <= lim.MaxSchemaSize
}

// Open is Open for the file version v (read through open): the header comes
// from the cache when it holds v, else it is read and parsed, and then kept.
// The reader's first block is the first one starting at or after start.
func (c *HeaderCache) Open(v FileVersion, open Opener, start int64, lim Limits) (*BlockReader, error) {
	lim = lim.withDefaults()
	for {
		c.mu.Lock()
		if e, ok := c.entries[v]; ok {
			c.lru.MoveToFront(e)
			h := e.Value.(*cachedHeader).h
			c.mu.Unlock()
			if !h.fits(lim) {
				return Open(v.Name, open, start, lim)
			}
			br, ok, err := openWithHeader(v.Name, h, open, start, lim)
			if ok || err != nil {
				return br, err
			}
			// The file no longer has this header: read it again.
			c.remove(v, h)
			continue
		}
		if wait, ok := c.inflight[v]; ok {
			c.mu.Unlock()
			<-wait
			c.mu.Lock()
			_, cached := c.entries[v]
			c.mu.Unlock()
			if !cached {
				// The first open failed, or its header was not kept.
				return Open(v.Name, open, start, lim)
			}
			continue
		}
		done := make(chan struct{})
		c.inflight[v] = done
		c.parses++
		c.mu.Unlock()

		br, err := Open(v.Name, open, start, lim)
		c.mu.Lock()
		delete(c.inflight, v)
		if err == nil {
			c.add(v, br.h)
		}
		c.mu.Unlock()
		close(done)
		return br, err
	}
}

// add keeps h for v, evicting the least recently used headers beyond the
// bounds. c.mu is held.
func (c *HeaderCache) add(v FileVersion, h *Header) {
	cost := headerCost(h)
	if cost > c.maxBytes {
		return
	}
	if e, ok := c.entries[v]; ok {
		c.drop(e)
	}
	c.entries[v] = c.lru.PushFront(&cachedHeader{v: v, h: h, cost: cost})
	c.bytes += cost
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.drop(c.lru.Back())
	}
}

// remove forgets v if it still maps to h.
func (c *HeaderCache) remove(v FileVersion, h *Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[v]; ok && e.Value.(*cachedHeader).h == h {
		c.drop(e)
	}
}

func (c *HeaderCache) drop(e *list.Element) {
	ch := c.lru.Remove(e).(*cachedHeader)
	delete(c.entries, ch.v)
	c.bytes -= ch.cost
}

// Len is the number of headers the cache holds.
func (c *HeaderCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// openWithHeader opens a BlockReader on a file whose header h is known,
// without reading the header: it opens the file at h.Size-16, checks that
// the header's sync marker is there (ok false, with no error, when it is
// not: the file is not the one h was read from), and goes on from there as
// Open does.
func openWithHeader(name string, h *Header, open Opener, start int64, lim Limits) (_ *BlockReader, ok bool, _ error) {
	at := h.Size - SyncSize
	rc, err := open(at)
	if err != nil {
		return nil, false, headerErr(name, at, ErrTruncated, err, "opening at byte %d", at)
	}
	s := newStream(rc, at)
	var sync [SyncSize]byte
	if err := s.readFull(sync[:]); err != nil || sync != h.Sync {
		rc.Close()
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, false, headerErr(name, at, ErrTruncated, err, "reading the header's sync marker")
		}
		return nil, false, nil
	}
	br, err := newBlockReader(name, h, lim)
	if err != nil {
		rc.Close()
		return nil, true, err
	}
	if err := br.positionAt(s, rc, open, start); err != nil {
		return nil, true, err
	}
	return br, true, nil
}
