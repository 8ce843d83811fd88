package workertest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

// jobServer is the Prism job server shared by all runs of a test binary.
type jobServer struct {
	endpoint string
	client   jobpb.JobServiceClient
}

var (
	jobServerOnce sync.Once
	sharedServer  *jobServer
	jobServerErr  error
)

// sharedJobServer starts the Prism job server on first use and returns it.
func sharedJobServer() (*jobServer, error) {
	jobServerOnce.Do(func() {
		sharedServer, jobServerErr = startJobServer()
	})
	return sharedServer, jobServerErr
}

// startJobServer starts an in-process Prism job server on a port the OS
// picked. prism.CreateJobServer takes a port number and does not report the
// address it serves on, so a free port is found first; if another process takes
// it in between, Prism's listen fails (it panics) and another port is tried.
func startJobServer() (*jobServer, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("workertest: finding a free port for the Prism job server: %w", err)
		}
		client, err := createJobServer(port)
		if err == nil {
			return &jobServer{endpoint: fmt.Sprintf("localhost:%d", port), client: client}, nil
		}
		lastErr = err
	}
	return nil, fmt.Errorf("workertest: starting the Prism job server: %w", lastErr)
}

func createJobServer(port int) (client jobpb.JobServiceClient, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("prism job server on port %d: %v", port, r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return prism.CreateJobServer(ctx, prism.Options{Port: port})
}

func freePort() (int, error) {
	lis, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}
