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

	"github.com/engram-dev/engram/internal/memory"
)

// ExportSummary is what `export` reports on stderr (or -o json|yaml).
type ExportSummary struct {
	Parts   int                 `json:"parts"`
	Records memory.ExportCounts `json:"records"`
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
	sum := ExportSummary{Records: memory.ExportCounts{}}
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
		bar.show(sum.Records.Total(), true)
		if tr.Complete {
			break
		}
		after = tr.Next
	}
	return a.report(a.errOut, sum, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "Exported %d records in %d part(s): %s.\n", sum.Records.Total(), sum.Parts, sum.Records)
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
			Counts memory.ExportCounts // the header's: the whole snapshot's records
		}
		if err := json.Unmarshal(line, &env); err != nil {
			return nil, fmt.Errorf("the export holds a line that is not JSON: %w", err)
		}
		switch env.Kind {
		case "trailer":
			last = append(last[:0], line...)
		case "header":
			if bar.total == 0 {
				bar.total = env.Counts.Total()
			}
		case "checkpoint":
		default:
			sum.Records[env.Kind]++
			bar.show(sum.Records.Total(), false)
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
	total := memory.ImportResult{Records: memory.ExportCounts{}, Inserted: memory.ExportCounts{}, Existing: memory.ExportCounts{}, DryRun: a.dryRun}
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
		total.Add(&res)
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
			verb, total.Owners, requests, total.Inserted, total.Existing, total.Embedded)
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
