package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Report is everything one run measured; bench/results/*.json hold it.
type Report struct {
	Mode        string         `json:"mode"`
	Parts       []string       `json:"parts"`
	Scale       Scale          `json:"scale"`
	StartedAt   time.Time      `json:"startedAt"`
	FinishedAt  time.Time      `json:"finishedAt"`
	DurationSec float64        `json:"durationSec"`
	Machine     Machine        `json:"machine"`
	Service     *ServiceReport `json:"service,omitempty"`
	// Conversation is the conversation memory part.
	Conversation *ConversationReport `json:"conversation,omitempty"`
	Jobs         *JobsReport         `json:"jobs,omitempty"`
	Operator     *OperatorReport     `json:"operator,omitempty"`
	Secrets      *SecretsReport      `json:"secrets,omitempty"`
	// Transfer is the export and import part (transfer.go).
	Transfer *TransferReport `json:"transfer,omitempty"`
	// Filters is the filtered search part (filters.go).
	Filters *FiltersReport `json:"filters,omitempty"`
	// ClientVectors is the client vectors part (clientvectors.go).
	ClientVectors *ClientVectorsReport `json:"clientVectors,omitempty"`
	// Rerank is the reranking overhead part (rerank.go).
	Rerank *RerankReport `json:"rerank,omitempty"`
	// Reembed is the re-embed part (reembed.go).
	Reembed *ReembedReport `json:"reembed,omitempty"`
	// Move is the tenant move part (move.go).
	Move    *MoveReport `json:"move,omitempty"`
	Targets []Target    `json:"targets"`
	// LargestGap names the target missed by the widest margin (empty when all are met).
	LargestGap string   `json:"largestGap,omitempty"`
	Errors     []string `json:"errors,omitempty"`
}

// writeResults writes <out>/<timestamp>-<mode>.json, latest.json and latest.md.
func writeResults(out string, rep *Report) ([]string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", out, err)
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding results: %w", err)
	}
	js = append(js, '\n')
	stamp := filepath.Join(out, rep.StartedAt.Format("20060102T150405Z")+"-"+rep.Mode+".json")
	latest := filepath.Join(out, "latest.json")
	md := filepath.Join(out, "latest.md")
	for _, f := range []struct {
		path string
		data []byte
	}{{stamp, js}, {latest, js}, {md, []byte(markdown(rep))}} {
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.path, err)
		}
	}
	return []string{stamp, latest, md}, nil
}
