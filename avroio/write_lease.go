package avroio

// The lease of a write's temporary directory: how a write beside it tells
// a running write from one that died.
//
// A runner-sharded write (the default) has Begin make a file named lease
// in its temporary directory, before Begin's marker. Every worker process
// that runs a step of the write (Begin, the writing bundles) renews it
// every leaseBeat, on a goroutine of its own, for as long as the worker
// runs: Beam Go cancels the context of a worker when the runner stops it
// (a LOOPBACK or in-process worker at the job's end, failed or not; a
// worker process ends with its process), and every method of a DoFn gets
// a context derived from its worker's. A worker stopped that way releases
// the lease (writes "released" into it) as it stops. A write beside it
// (removeStaleTempDirs) takes the directory for a write that is no longer
// running, and removes it, when its lease says "released", or when it was
// last renewed more than leaseTTL ago (a worker killed, on Dataflow or a
// worker process on Flink). A directory without a lease (a windowed
// write's, a write with fixed shards, one made by an sdfio before leases,
// or one whose lease its own write removed when a bundle failed) keeps the
// older rule: its newest file older than WithStaleTempAge.
//
// The renewal never makes the lease: on a local filesystem it sets the
// file's times (os.Chtimes fails on a missing file), elsewhere it asks
// for the file's size and rewrites it only if it is there. A lease gone
// stops the renewal, so the finalize step, which removes it last, ends
// it (the finalize step first stops its own process's renewal, so that
// nothing of this process rewrites what it removes; on an object store a
// renewal on another worker racing the removal can leave the lease
// behind, which a later write removes once it is leaseTTL old).

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// leaseFile names the lease in the temporary directory.
const leaseFile = "lease"

// leaseReleased is what a released lease holds.
const leaseReleased = "released"

// leaseTTL is how long a lease may go unrenewed before the write that
// holds it is taken for dead; leaseBeat, how often it is renewed.
const (
	leaseTTL  = 5 * time.Minute
	leaseBeat = 30 * time.Second
)

// renewal is this process's renewal of one lease.
type renewal struct {
	stop chan struct{}
	done chan struct{}
}

var (
	renewalsMu sync.Mutex
	renewals   = map[string]*renewal{} // by temporary directory
)

// holdLease renews the lease of the temporary directory dir from this
// process while ctx lives (one renewal per directory and process),
// releasing it when ctx ends. A lease that is not there is not renewed.
func holdLease(ctx context.Context, dir string) { holdLeaseEvery(ctx, dir, leaseBeat) }

// holdLeaseEvery is holdLease renewing every beat.
func holdLeaseEvery(ctx context.Context, dir string, beat time.Duration) {
	renewalsMu.Lock()
	defer renewalsMu.Unlock()
	if _, ok := renewals[dir]; ok {
		return
	}
	r := &renewal{stop: make(chan struct{}), done: make(chan struct{})}
	renewals[dir] = r
	go r.run(ctx, dir, beat)
}

// dropLease stops this process's renewal of dir's lease and waits for it
// to end, so that nothing of this process writes the lease afterwards.
func dropLease(dir string) {
	renewalsMu.Lock()
	r := renewals[dir]
	delete(renewals, dir)
	renewalsMu.Unlock()
	if r != nil {
		close(r.stop)
		<-r.done
	}
}

func (r *renewal) run(ctx context.Context, dir string, beat time.Duration) {
	defer close(r.done)
	defer func() {
		renewalsMu.Lock()
		if renewals[dir] == r {
			delete(renewals, dir)
		}
		renewalsMu.Unlock()
	}()
	t := time.NewTicker(beat)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-ctx.Done():
			// The worker is stopped: its job ended. A write that
			// succeeded removed its lease; one that failed is dead.
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			writeLease(rctx, dir, leaseReleased, false)
			cancel()
			return
		case <-t.C:
			if writeLease(ctx, dir, "", false) != nil {
				return // gone: the write finished, or its lease was removed
			}
		}
	}
}

// writeLease writes the lease of dir holding content: made when create
// is set (Begin), otherwise only if it is there (a renewal sets a local
// file's times, and rewrites others).
func writeLease(ctx context.Context, dir, content string, create bool) error {
	path := dir + leaseFile
	if !strings.Contains(path, "://") {
		if content == "" && !create {
			now := time.Now()
			return os.Chtimes(path, now, now)
		}
		flag := os.O_WRONLY | os.O_TRUNC
		if create {
			flag |= os.O_CREATE
		}
		f, err := os.OpenFile(path, flag, 0o644)
		if err != nil {
			return err
		}
		_, err = io.WriteString(f, content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return err
	}
	defer fs.Close()
	if !create {
		if _, err := fs.Size(ctx, path); err != nil {
			return err
		}
	}
	w, err := fs.OpenWrite(ctx, path)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, content)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// leaseAlive reports whether the lease at path, which a listing showed,
// is that of a running write, by now: renewed within leaseTTL and not
// released. gone says that it is no longer there.
func leaseAlive(ctx context.Context, fs filesystem.Interface, lm filesystem.LastModifiedGetter, path string, now time.Time) (alive, gone bool, err error) {
	t, err := lm.LastModified(ctx, path)
	if err != nil {
		if _, serr := fs.Size(ctx, path); serr != nil {
			return false, true, nil
		}
		return false, false, fmt.Errorf("avroio.Write: when was %s modified: %w", path, err)
	}
	if now.Sub(t) > leaseTTL {
		return false, false, nil
	}
	r, err := fs.OpenRead(ctx, path)
	if err != nil {
		if _, serr := fs.Size(ctx, path); serr != nil {
			return false, true, nil
		}
		return false, false, fmt.Errorf("avroio.Write: reading %s: %w", path, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, 64))
	if err != nil {
		return false, false, fmt.Errorf("avroio.Write: reading %s: %w", path, err)
	}
	return string(b) != leaseReleased, false, nil
}
