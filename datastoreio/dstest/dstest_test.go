package dstest_test

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/sdfio/sdfio/datastoreio/dstest"
)

type thing struct {
	N int
	S string
}

// TestStartPutGetResetStop starts its own emulator (unless the environment
// names one), writes and reads through the official client, resets, and
// checks that Stop leaves no process behind.
func TestStartPutGetResetStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := dstest.New(ctx)
	if err != nil {
		if errors.Is(err, dstest.ErrMissing) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer e.Stop()
	c, err := e.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := dstest.Namespace(t)
	k := datastore.IDKey("Thing", 1<<62+5, nil)
	k.Namespace = ns
	if _, err := c.Put(ctx, k, &thing{N: 7, S: "x"}); err != nil {
		t.Fatal(err)
	}
	var got thing
	if err := c.Get(ctx, k, &got); err != nil {
		t.Fatal(err)
	}
	if got != (thing{N: 7, S: "x"}) {
		t.Fatalf("got %+v", got)
	}
	if err := e.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, k, &got); !errors.Is(err, datastore.ErrNoSuchEntity) {
		t.Fatalf("after Reset, Get = %v, want ErrNoSuchEntity", err)
	}
	if !e.Started() {
		return
	}
	pid := dstest.EmulatorPID(e)
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the emulator's process %d is still there after Stop (kill 0: %v)", pid, err)
	}
}

func TestNamespaceIsValidAndUnique(t *testing.T) {
	a, b := dstest.Namespace(t), dstest.Namespace(t)
	if a == b {
		t.Fatalf("two namespaces are both %q", a)
	}
	for _, ns := range []string{a, b} {
		for _, r := range ns {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				t.Fatalf("namespace %q has %q", ns, r)
			}
		}
	}
}
