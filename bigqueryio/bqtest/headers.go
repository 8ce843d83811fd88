package bqtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
)

// Call is a request the server received, as recorded by WithHeaderLog:
// which API it came through, its method and the recorded headers.
type Call struct {
	// API is "grpc" for a call of the Storage Read or Write API, "rest" for
	// a request to RESTEndpoint (or RESTHandler).
	API string
	// Method is a gRPC call's full method
	// ("/google.cloud.bigquery.storage.v1.BigQueryRead/CreateReadSession"),
	// or a REST request's method and path ("POST /bigquery/v2/projects/p/jobs").
	Method string
	// Query is a REST request's query parameters ("location", "fields",
	// "prettyPrint"...); nil for a gRPC call.
	Query url.Values
	// Header holds the request's values of the headers WithHeaderLog names,
	// by their canonical name (http.CanonicalHeaderKey); a header the
	// request did not carry is absent.
	Header http.Header
}

// WithHeaderLog makes the server record, for every gRPC call and REST
// request it receives, the values of the named request headers (gRPC
// metadata keys; case does not matter), such as "x-goog-user-project",
// which option.WithQuotaProject sets, or "user-agent". Calls reads them.
// Without it nothing is recorded. A streaming call is recorded once, when
// it opens.
func WithHeaderLog(names ...string) Option {
	return func(c *config) {
		for _, n := range names {
			c.headers = append(c.headers, http.CanonicalHeaderKey(n))
		}
	}
}

// Calls returns the calls recorded so far (see WithHeaderLog), in the
// order the server received them.
func (s *Server) Calls() []Call {
	s.callsMu.Lock()
	defer s.callsMu.Unlock()
	return append([]Call(nil), s.calls...)
}

// record records a call of api and method (and query q, REST's) with the
// headers get returns, if WithHeaderLog was given.
func (s *Server) record(api, method string, q url.Values, get func(string) []string) {
	if len(s.cfg.headers) == 0 {
		return
	}
	h := http.Header{}
	for _, n := range s.cfg.headers {
		if vs := get(n); len(vs) > 0 {
			h[n] = append([]string(nil), vs...)
		}
	}
	s.callsMu.Lock()
	s.calls = append(s.calls, Call{API: api, Method: method, Query: q, Header: h})
	s.callsMu.Unlock()
}

func (s *Server) recordGRPC(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.record("grpc", method, nil, func(n string) []string { return md.Get(strings.ToLower(n)) })
}

func (s *Server) unaryHeaders(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	s.recordGRPC(ctx, info.FullMethod)
	return h(ctx, req)
}

func (s *Server) streamHeaders(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	s.recordGRPC(ss.Context(), info.FullMethod)
	return h(srv, ss)
}

func (s *Server) recordREST(r *http.Request) {
	s.record("rest", r.Method+" "+r.URL.Path, r.URL.Query(), func(n string) []string { return r.Header.Values(n) })
}

// WithTLS makes the server's gRPC endpoint (Addr) speak TLS, with a
// certificate for 127.0.0.1 made for it and signed by itself (CACert), so
// that Google's gRPC clients send it what they send only over TLS: the
// per-call credentials, with the quota project (option.WithQuotaProject)
// and request reason they carry. A client then needs, instead of
// WithInsecure (which drops credentials), the TLS option of CACert and
// some credentials, such as option.WithTokenSource of a static token. The
// REST endpoint stays plain HTTP.
func WithTLS() Option { return func(c *config) { c.tls = true } }

// CACert is the PEM certificate a client of a WithTLS server trusts (nil
// without WithTLS). TLSOption turns it into a client option.
func (s *Server) CACert() []byte { return append([]byte(nil), s.caPEM...) }

// TLSOption is the client option that makes a gRPC client trust the
// certificate caPEM (a WithTLS server's CACert).
func TLSOption(caPEM []byte) (option.ClientOption, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("bqtest: TLSOption: no PEM certificate in caPEM")
	}
	return option.WithGRPCDialOption(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))), nil
}

// selfSigned is a TLS certificate for 127.0.0.1, valid for a day, and its
// PEM.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("bqtest: TLS key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bqtest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("bqtest: TLS certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
