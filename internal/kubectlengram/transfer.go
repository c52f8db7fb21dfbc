package kubectlengram

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/engram-dev/engram/internal/memory"
)

// ExportSummary is what `export` reports on stderr (or -o json|yaml).
type ExportSummary struct {
	Parts   int              `json:"parts"`
	Records map[string]int64 `json:"records"`
}

// runExport writes an export of the runtime (or of --owner) to stdout,
// part after part, resuming from each trailer's cursor until one says
// complete; a summary goes to stderr.
func runExport(ctx context.Context, a *app, args []string) error {
	s, err := a.serviceFor(ctx, args[0])
	if err != nil {
		return err
	}
	path := "/v1/export"
	if a.owner != "" {
		path = ownerPath(a.owner, "/export")
	}
	sum := ExportSummary{Records: map[string]int64{}}
	bar := &meter{a: a, unit: "records"}
	out := bufio.NewWriter(a.out)
	after := ""
	for {
		q := url.Values{}
		if a.vectors {
			q.Set("vectors", "true")
		}
		if after != "" {
			q.Set("after", after)
		}
		tr, err := exportPart(ctx, s, path, q, out, &sum, bar)
		if err != nil {
			return err
		}
		sum.Parts++
		if err := out.Flush(); err != nil {
			return fmt.Errorf("writing the export: %w", err)
		}
		bar.note = fmt.Sprintf("%d part(s)", sum.Parts)
		bar.show(total(sum.Records), true)
		if tr.Complete {
			break
		}
		after = tr.Next
	}
	return a.report(a.errOut, sum, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "Exported %d records in %d part(s): %s.\n", total(sum.Records), sum.Parts, countsText(sum.Records))
		return err
	})
}

// exportPart copies one part to out and returns its trailer; a part
// without one was cut (the connection broke or the service failed).
func exportPart(ctx context.Context, s *service, path string, q url.Values, out io.Writer, sum *ExportSummary, bar *meter) (*memory.ExportTrailer, error) {
	body, err := s.stream(ctx, path, q)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), memory.ExportMaxLineBytes)
	var last []byte
	for sc.Scan() {
		line := sc.Bytes()
		var env struct {
			Kind   string
			Counts map[string]int64 // the header's: the whole snapshot's records
		}
		if err := json.Unmarshal(line, &env); err != nil {
			return nil, fmt.Errorf("the export holds a line that is not JSON: %w", err)
		}
		switch env.Kind {
		case "trailer":
			last = append(last[:0], line...)
		case "header":
			if bar.total == 0 {
				bar.total = total(env.Counts)
			}
		case "checkpoint":
		default:
			sum.Records[env.Kind]++
			bar.show(total(sum.Records), false)
		}
		if _, err := out.Write(append(line, '\n')); err != nil {
			return nil, fmt.Errorf("writing the export: %w", err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the export: %w", err)
	}
	var tr memory.ExportTrailer
	if last == nil || json.Unmarshal(last, &tr) != nil {
		return nil, errors.New("the export was cut before its trailer (the connection broke or the service failed); run the command again")
	}
	return &tr, nil
}

// runImport sends an export file (--file, "-" = stdin) to the runtime in
// requests of at most --max-request-bytes, each whole owners, and sums
// up what the service wrote.
func runImport(ctx context.Context, a *app, args []string) error {
	in, err := a.openInput()
	if err != nil {
		return err
	}
	defer in.Close()
	s, err := a.serviceFor(ctx, args[0])
	if err != nil {
		return err
	}
	total := memory.ImportResult{Records: map[string]int64{}, Inserted: map[string]int64{}, Existing: map[string]int64{}, DryRun: a.dryRun}
	q := url.Values{}
	if a.dryRun {
		q.Set("dryRun", "true")
	}
	requests := 0
	src := io.Reader(in) // --file, or stdin (a file when redirected: `< export.jsonl`)
	if a.file == "" || a.file == "-" {
		src = a.in
	}
	bar := &meter{a: a, unit: "bytes read", total: inputSize(src)}
	read := &countingReader{r: in, m: bar}
	err = memory.ChunkExport(read, a.maxRequestBytes, func(chunk []byte) error {
		status, raw, err := s.sendAs(ctx, http.MethodPost, "/v1/import", q, chunk, "application/x-ndjson")
		if err != nil {
			return err
		}
		if status >= 300 {
			return importRefusal(status, raw, requests)
		}
		var res memory.ImportResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("decoding the answer of the import: %w", err)
		}
		requests++
		addResult(&total, &res)
		bar.note = fmt.Sprintf("%d owner(s) in %d request(s)", total.Owners, requests)
		bar.show(read.n, true)
		return nil
	})
	if err != nil {
		return err
	}
	return a.report(a.out, total, func(w io.Writer) error {
		verb := "Imported"
		if a.dryRun {
			verb = "Dry run, nothing written: would import"
		}
		_, err := fmt.Fprintf(w, "%s %d owner(s) in %d request(s): inserted %s; already there %s; %d vectors embedded.\n",
			verb, total.Owners, requests, countsText(total.Inserted), countsText(total.Existing), total.Embedded)
		return err
	})
}

// importRefusal is the service's refusal of request n, its field errors
// listed (their line numbers count from the request's first line).
func importRefusal(status int, raw []byte, n int) error {
	var p struct {
		ServiceError
		Errors []memory.FieldError `json:"errors"`
	}
	p.Status = status
	if json.Unmarshal(raw, &p) != nil || p.Type == "" {
		p.Detail = clip(string(raw), 300)
	}
	msg := p.Error()
	for _, fe := range p.Errors {
		msg += fmt.Sprintf("\n  %s: %s", fe.Field, fe.Message)
	}
	if n > 0 {
		msg += fmt.Sprintf("\n(%d request(s) before this one were written; running the import again is safe)", n)
	}
	return errors.New(msg)
}

func addResult(t, r *memory.ImportResult) {
	t.Lines += r.Lines
	t.Parts += r.Parts
	t.Owners += r.Owners
	t.Embedded += r.Embedded
	for k, v := range r.Records {
		t.Records[k] += v
	}
	for k, v := range r.Inserted {
		t.Inserted[k] += v
	}
	for k, v := range r.Existing {
		t.Existing[k] += v
	}
}

// openInput is --file: a path, or "-" for stdin.
func (a *app) openInput() (io.ReadCloser, error) {
	if a.file == "" || a.file == "-" {
		return io.NopCloser(a.in), nil
	}
	f, err := os.Open(a.file)
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	return f, nil
}

// report ends a transfer with its summary on w (stderr for an export,
// whose stdout is the export), as a table or -o json|yaml.
func (a *app) report(w io.Writer, v any, human func(io.Writer) error) error {
	a.progress("%s", "")
	saved := a.out
	a.out = w
	defer func() { a.out = saved }()
	return a.printData(v, human)
}

func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// countsText is "memory 2003, message 1506, ..." without the zeros.
func countsText(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "nothing"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
