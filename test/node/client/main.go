// Command client is the node suite's HTTP client inside the cluster: the
// suite runs it in a Pod (image localhost/engram/e2e-client) and calls it
// with `kubectl exec`, because the engram image has no shell or client.
//
//	client -serve                       stay up until SIGTERM (the Pod's main process)
//	client [-X METHOD] [-H 'K: V']... [-d BODY] [-timeout 5s] [-ca BASE64-PEM -servername NAME] URL
//
// With -ca, an https URL's certificate must verify against that CA (and
// no other) for the name -servername: the Pods have no cluster DNS, so
// the suite calls a Service's ClusterIP and names the Service here.
//
// A request prints the status code on the first line and the body after
// it, and exits 0 whatever the status; a request that got no answer
// (refused, timed out) prints the error and exits 3, so the suite can tell
// "refused by a NetworkPolicy" from "answered with an error".
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	serve := flag.Bool("serve", false, "wait for SIGTERM (the Pod's main process)")
	method := flag.String("X", http.MethodGet, "HTTP method")
	data := flag.String("d", "", "request body")
	timeout := flag.Duration("timeout", 5*time.Second, "request timeout")
	ca := flag.String("ca", "", "the CA certificate(s) an https server must verify against, PEM encoded in base64")
	serverName := flag.String("servername", "", "the name the server's certificate must hold (default: the URL's host)")
	var hs headers
	flag.Var(&hs, "H", "request header 'Name: value' (repeatable)")
	flag.Parse()
	if *serve {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		defer stop()
		<-ctx.Done()
		return
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: client [-X METHOD] [-H 'K: V'] [-d BODY] [-timeout D] URL | client -serve")
		os.Exit(2)
	}
	hc := &http.Client{Timeout: *timeout}
	if *ca != "" {
		cfg, err := tlsConfig(*ca, *serverName)
		if err != nil {
			fmt.Println("bad -ca:", err)
			os.Exit(2)
		}
		hc.Transport = &http.Transport{TLSClientConfig: cfg}
	}
	os.Exit(request(hc, *method, flag.Arg(0), *data, hs))
}

// tlsConfig trusts only the CA of caB64 (base64 of PEM) and verifies the
// server's certificate for serverName.
func tlsConfig(caB64, serverName string) (*tls.Config, error) {
	pemBytes, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("no PEM certificate in it")
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

func request(hc *http.Client, method, url, data string, hs headers) int {
	var body io.Reader
	if data != "" {
		body = strings.NewReader(data)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		fmt.Println("bad request:", err)
		return 2
	}
	for _, h := range hs {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			fmt.Println("bad header (want 'Name: value'):", h)
			return 2
		}
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if data != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		fmt.Println("no answer:", err)
		return 3
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	fmt.Printf("%d\n%s\n", resp.StatusCode, b)
	return 0
}
