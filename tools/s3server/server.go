// Command s3server is a small S3-compatible server for tests (the
// RetentionJob export's tests, internal/jobrun): gofakes3 on a bolt
// file, listening on 127.0.0.1 only. hack/s3server.sh builds it once.
//
// It is its own module, beside module tools rather than in it: the keys of
// hack/envtest.sh and hack/cluster.sh hash tools/go.mod and tools/*/main.go,
// and this server must not make them rebuild Kubernetes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	bolt "go.etcd.io/bbolt"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	addr := flag.String("listen", "127.0.0.1:0", "address to listen on (a loopback address)")
	db := flag.String("db", "", "bolt file holding the buckets (created when missing)")
	bucket := flag.String("bucket", "", "bucket to create at start when missing")
	addrFile := flag.String("addr-file", "", "file the listening address is written to once the server accepts connections")
	flag.Parse()
	if *db == "" {
		return errors.New("--db is required")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", *addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %q: a test server listens on a loopback address only", *addr)
	}
	// Closed at exit, so a server started again on the same file (a test
	// of a store that went away and came back) finds what was written.
	bdb, err := bolt.Open(*db, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("opening %s: %w", *db, err)
	}
	defer bdb.Close()
	backend := s3bolt.New(bdb)
	if *bucket != "" {
		if err := backend.CreateBucket(*bucket); err != nil && !gofakes3.IsAlreadyExists(err) {
			return fmt.Errorf("creating bucket %q: %w", *bucket, err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *addrFile != "" {
		// Written under another name and renamed: a reader never sees half an address.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()), 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return err
		}
	}
	srv := &http.Server{Handler: gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server(), ReadHeaderTimeout: 10 * time.Second}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-stop
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
