package demo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	memoryv1alpha1 "github.com/engram-dev/engram/api/v1alpha1"
	"github.com/engram-dev/engram/internal/memory"
)

// CopyRuntime is the second runtime the demo imports the samples' tenant
// into: the same database, policy and embedder, a schema of its own.
const CopyRuntime = "support-bot-copy"

// Bounds of the transfer step: an export of the demo's tenant is one part
// of a few hundred lines, far below both.
const (
	maxExportParts   = 100
	importChunkBytes = 4 << 20
)

// TransferReport is what the export/import step showed (docs/export.md).
type TransferReport struct {
	Runtime string // CopyRuntime
	Schema  string // its schema
	// Parts, Lines and Bytes of the export (GET /v1/export of the samples'
	// runtime); Header are the counts of its (first) header, Trailer the
	// sums of its trailers' counts, Records the data lines counted here.
	Parts          int
	Lines          int64
	Bytes          int
	Header         memory.ExportCounts
	Trailer        memory.ExportCounts
	Records        memory.ExportCounts
	ChecksumsMatch bool     // each part's sha256 is that of its lines
	Owners         []string // the owners the export holds
	ReadyAfter     time.Duration
	// First and Second are the answers of the two imports of the file.
	First, Second *memory.ImportResult
	// SourceAlice and CopyAlice are alice's memories in both runtimes.
	SourceAlice, CopyAlice int
	SearchTop              string // the copy's best hit for the demo's search
	Took                   time.Duration
}

// copyRuntime is CopyRuntime with the samples' database, policy and
// embedder (the schema derived from its own name), one replica.
func copyRuntime(src *memoryv1alpha1.MemoryRuntime) *memoryv1alpha1.MemoryRuntime {
	db := src.Spec.Database
	db.Schema = ""
	return &memoryv1alpha1.MemoryRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: CopyRuntime, Namespace: src.Namespace},
		Spec: memoryv1alpha1.MemoryRuntimeSpec{
			Database: db, PolicyRef: src.Spec.PolicyRef, Embedding: src.Spec.Embedding,
			Service: memoryv1alpha1.ServiceSpec{Replicas: ptr.To(int32(1))},
		},
	}
}

// transfer exports the samples' tenant, imports it into CopyRuntime twice
// (the second changes nothing) and searches the copy.
func (s *Scenario) transfer(ctx context.Context, r *Report) error {
	t := &TransferReport{Runtime: CopyRuntime}
	r.Transfer = t
	start := time.Now()
	src, err := s.api(ctx, r)
	if err != nil {
		return err
	}
	file, err := s.exportTenant(ctx, src, t)
	if err != nil {
		return err
	}
	s.printf("   GET /v1/export (%s) -> %d part(s), %d lines, %d bytes, owners %s\n", r.Runtime, t.Parts, t.Lines, t.Bytes, strings.Join(t.Owners, ", "))
	s.printf("     header counts  %s\n     trailer counts %s; each part's sha256 matches its lines: %v\n", t.Header, t.Trailer, t.ChecksumsMatch)

	dst, err := s.startCopy(ctx, r, t)
	if err != nil {
		return err
	}
	// Start from a clean slate so a second run tells the same story (the
	// copy keeps what an earlier run imported, with other ids).
	for _, o := range t.Owners {
		if !memory.ValidScopeID(o) {
			continue // the tenant-wide memories (_global): the demo writes none
		}
		if err := dst.Do(ctx, http.MethodDelete, "/v1/owners/"+url.PathEscape(o), nil, nil); err != nil {
			return err
		}
	}
	if t.First, err = importFile(ctx, dst, file); err != nil {
		return err
	}
	s.printf("   POST /v1/import (%s) -> %d owner(s): inserted %s; %d vectors embedded on the way in (the export carries none)\n",
		CopyRuntime, t.First.Owners, t.First.Inserted, t.First.Embedded)
	if t.Second, err = importFile(ctx, dst, file); err != nil {
		return err
	}
	s.printf("   POST /v1/import again -> inserted %d records; already there %s (idempotent)\n", t.Second.Inserted.Total(), t.Second.Existing)

	if t.SourceAlice, err = activeMemories(ctx, src, "alice"); err != nil {
		return err
	}
	if t.CopyAlice, err = activeMemories(ctx, dst, "alice"); err != nil {
		return err
	}
	body := map[string]any{"query": "which editor theme does alice like", "topK": 1}
	var res struct {
		Results []memory.SearchHit `json:"results"`
	}
	if err := dst.Do(ctx, http.MethodPost, "/v1/owners/alice/search", body, &res); err != nil {
		return err
	}
	if len(res.Results) > 0 {
		t.SearchTop = res.Results[0].Memory.Content
	}
	t.Took = time.Since(start)
	s.printf("   alice has %d memories in %s, %d in %s; search %q there -> %q\n   (export, new runtime, two imports and the search: %s)\n",
		t.SourceAlice, r.Runtime, t.CopyAlice, CopyRuntime, body["query"], t.SearchTop, t.Took.Round(100*time.Millisecond))
	return nil
}

// startCopy creates CopyRuntime (unless it exists), waits until it is
// Ready and returns a client of its service with its admin token.
func (s *Scenario) startCopy(ctx context.Context, r *Report, t *TransferReport) (*API, error) {
	var src memoryv1alpha1.MemoryRuntime
	if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: r.Runtime}, &src); err != nil {
		return nil, fmt.Errorf("reading runtime %s: %w", r.Runtime, err)
	}
	rt := copyRuntime(&src)
	verb := "created"
	if err := s.Client.Create(ctx, rt); apierrors.IsAlreadyExists(err) {
		verb = "exists already"
		if err := s.repointCopy(ctx); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("creating runtime %s: %w", CopyRuntime, err)
	}
	start := time.Now()
	if err := s.poll(ctx, "runtime "+CopyRuntime+" to be Ready", func() (bool, error) {
		return s.runtimeReady(ctx, CopyRuntime)
	}); err != nil {
		return nil, err
	}
	t.ReadyAfter = time.Since(start)
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(rt), rt); err != nil {
		return nil, err
	}
	t.Schema = rt.Status.Schema
	policy := "none"
	if rt.Spec.PolicyRef != nil {
		policy = rt.Spec.PolicyRef.Name
	}
	s.printf("   memoryruntime/%s %s (policy %s, %s %d, schema %s): Ready after %s\n", CopyRuntime, verb, policy,
		rt.Spec.Embedding.Provider, rt.Spec.Embedding.Dimensions, t.Schema, t.ReadyAfter.Round(100*time.Millisecond))
	return s.api(ctx, &Report{Runtime: CopyRuntime})
}

// exportTenant reads the whole tenant's export, part after part, and
// checks each part: a header first, a trailer last whose sha256 is that of
// the lines before it.
func (s *Scenario) exportTenant(ctx context.Context, api *API, t *TransferReport) ([]byte, error) {
	t.Records, t.Trailer = memory.ExportCounts{}, memory.ExportCounts{}
	t.ChecksumsMatch = true
	owners := map[string]bool{}
	var file bytes.Buffer
	after := ""
	for part := 0; ; part++ {
		if part == maxExportParts {
			return nil, fmt.Errorf("the export did not complete in %d parts", maxExportParts)
		}
		path := "/v1/export"
		if after != "" {
			path += "?after=" + url.QueryEscape(after)
		}
		raw, err := api.Raw(ctx, http.MethodGet, path, "", nil)
		if err != nil {
			return nil, err
		}
		tr, err := readPart(raw, t, owners)
		if err != nil {
			return nil, fmt.Errorf("export part %d: %w", part+1, err)
		}
		file.Write(raw)
		t.Parts++
		if tr.Complete {
			break
		}
		after = tr.Next
	}
	t.Owners = slices.Sorted(maps.Keys(owners))
	t.Bytes = file.Len()
	return file.Bytes(), nil
}

// readPart counts a part's lines into t and returns its trailer.
func readPart(raw []byte, t *TransferReport, owners map[string]bool) (*memory.ExportTrailer, error) {
	sum := sha256.New()
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), memory.ExportMaxLineBytes)
	var tr *memory.ExportTrailer
	for sc.Scan() {
		line := sc.Bytes()
		var env struct {
			Kind   string              `json:"kind"`
			Owner  string              `json:"owner"`
			Counts memory.ExportCounts `json:"counts"`
		}
		if err := json.Unmarshal(line, &env); err != nil {
			return nil, fmt.Errorf("a line is not JSON: %w", err)
		}
		t.Lines++
		switch env.Kind {
		case memory.ExportKindTrailer:
			tr = &memory.ExportTrailer{}
			if err := json.Unmarshal(line, tr); err != nil {
				return nil, fmt.Errorf("decoding the trailer: %w", err)
			}
			t.Trailer.Add(tr.Counts)
			t.ChecksumsMatch = t.ChecksumsMatch && hex.EncodeToString(sum.Sum(nil)) == tr.SHA256
			continue
		case memory.ExportKindHeader:
			if t.Header == nil {
				t.Header = env.Counts
			}
		case memory.ExportKindCheckpoint:
		default:
			t.Records[env.Kind]++
			owners[env.Owner] = true
		}
		sum.Write(line)
		sum.Write([]byte{'\n'})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, errors.New("no trailer: the export was cut")
	}
	return tr, nil
}

// importFile sends an export to POST /v1/import in bodies of whole owners
// and sums up the answers.
func importFile(ctx context.Context, api *API, file []byte) (*memory.ImportResult, error) {
	sum := &memory.ImportResult{Records: memory.ExportCounts{}, Inserted: memory.ExportCounts{}, Existing: memory.ExportCounts{}}
	err := memory.ChunkExport(bytes.NewReader(file), importChunkBytes, func(chunk []byte) error {
		raw, err := api.Raw(ctx, http.MethodPost, "/v1/import", "application/x-ndjson", chunk)
		if err != nil {
			return err
		}
		var res memory.ImportResult
		if err := json.Unmarshal(raw, &res); err != nil {
			return fmt.Errorf("decoding the answer of the import: %w", err)
		}
		sum.Add(&res)
		return nil
	})
	return sum, err
}

// activeMemories is how many active memories owner has.
func activeMemories(ctx context.Context, api *API, owner string) (int, error) {
	var page memory.ListPage
	if err := api.Do(ctx, http.MethodGet, "/v1/owners/"+owner+"/memories?limit=100", nil, &page); err != nil {
		return 0, err
	}
	return len(page.Items), nil
}
