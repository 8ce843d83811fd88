package dstest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// TestDepsLooksWhereStartLooks: internal/setup/deps.sh, which `make deps`
// runs to install the emulator when it is missing, finds it exactly where
// Start does (so that it installs nothing where Start finds one, and
// nothing Start would not find), here and with CLOUDSDK_ROOT_DIR pointing
// at another SDK; and it lists the same SDK roots.
func TestDepsLooksWhereStartLooks(t *testing.T) {
	locate := func() string {
		t.Helper()
		out, err := exec.Command("/bin/bash", "../../internal/setup/deps.sh", "--locate-emulator").Output()
		if _, exit := err.(*exec.ExitError); err != nil && !exit {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	check := func(what string) {
		t.Helper()
		if got, want := locate(), dstest.EmulatorJar(); got != want {
			t.Errorf("%s: deps.sh finds the emulator at %q, Start at %q", what, got, want)
		}
		out, err := exec.Command("/bin/bash", "../../internal/setup/deps.sh", "--sdk-roots").Output()
		if err != nil {
			t.Fatal(err)
		}
		roots := strings.Fields(string(out))
		if start := dstest.SDKRoots(); len(start) < len(roots) || !slices.Equal(start[:len(roots)], roots) {
			t.Errorf("%s: deps.sh looks in %q, Start in %q", what, roots, start)
		}
	}
	check("this machine")
	if os.Getenv("CI") == "true" && dstest.EmulatorJar() == "" {
		t.Error("CI=true and no emulator where Start looks: make deps should have installed it")
	}
	sdk := t.TempDir()
	jar := filepath.Join(sdk, "platform", "cloud-datastore-emulator", "CloudDatastore.jar")
	if err := os.MkdirAll(filepath.Dir(jar), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jar, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLOUDSDK_ROOT_DIR", sdk)
	check("CLOUDSDK_ROOT_DIR=" + sdk)
	if got := locate(); got != jar {
		t.Errorf("CLOUDSDK_ROOT_DIR=%s: deps.sh finds %q, want %s", sdk, got, jar)
	}
}
