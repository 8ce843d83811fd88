package bqtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
)

// RouteGoogleAPIs makes the REST clients of Google's Go libraries in this
// process reach the server, for code that makes its clients without an
// endpoint option — Beam Go's bigqueryio.Write calls
// bigquery.NewClient(ctx, project) — so that such code can be tested and
// benchmarked against bqtest. It changes process-wide state until restore
// is called: http.DefaultTransport (which Google's API and auth clients
// clone) dials the server's REST API over TLS whatever host is asked for,
// and GOOGLE_APPLICATION_CREDENTIALS names a service-account key whose
// tokens the server issues. Clients made before it, or with their own
// transport, are not affected; gRPC clients are not affected. Not for
// tests that run in parallel with others in the process. restore may be
// called more than once.
func (s *Server) RouteGoogleAPIs() (restore func(), err error) {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("bqtest: http.DefaultTransport is a %T, not an *http.Transport", http.DefaultTransport)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	creds, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "bqtest", "private_key_id": "bqtest",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "bqtest@bqtest.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": "https://oauth2.googleapis.com/token",
	})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bqtest-creds-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "credentials.json")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	rest := s.RESTHandler()
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			writeJSON(w, map[string]any{"access_token": "bqtest", "token_type": "Bearer", "expires_in": 3600})
			return
		}
		rest.ServeHTTP(w, r)
	}))
	tr := base.Clone()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, ts.Listener.Addr().String())
	}
	tr.DialTLSContext = nil
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // the local server's certificate, for any host name
	oldEnv, hadEnv := os.LookupEnv("GOOGLE_APPLICATION_CREDENTIALS")
	os.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	http.DefaultTransport = tr
	var once sync.Once
	return func() {
		once.Do(func() {
			http.DefaultTransport = base
			if hadEnv {
				os.Setenv("GOOGLE_APPLICATION_CREDENTIALS", oldEnv)
			} else {
				os.Unsetenv("GOOGLE_APPLICATION_CREDENTIALS")
			}
			ts.Close()
			os.RemoveAll(dir)
		})
	}, nil
}
