package memory

import (
	"strconv"

	"github.com/engram-dev/engram/internal/memory/core"
)

// AppendJSON appends the answer as encoding/json's Marshal writes it, byte
// for byte (field order, omitempty, HTML escaping), without reflection:
// the REST search answer is written on every search (issue 32). false:
// a value Marshal refuses (a NaN score, a year past 9999); the caller then
// marshals the answer with encoding/json, which reports the error.
// TestSearchResultAppendJSONMatchesMarshal compares the two.
func (r *SearchResult) AppendJSON(b []byte) ([]byte, bool) {
	ok := true
	b = append(b, `{"results":`...)
	b = core.AppendJSONArray(b, r.Results, func(b []byte, h *SearchHit) []byte {
		b, hitOK := appendHitJSON(b, h)
		ok = ok && hitOK
		return b
	})
	b = append(b, `,"truncated":`...)
	b = strconv.AppendBool(b, r.Truncated)
	if r.Omitted != 0 {
		b = append(b, `,"omitted":`...)
		b = strconv.AppendInt(b, int64(r.Omitted), 10)
	}
	if r.Reranked != nil {
		b = append(b, `,"reranked":`...)
		b = strconv.AppendBool(b, *r.Reranked)
	}
	if r.RerankReason != "" {
		b = append(b, `,"rerankReason":`...)
		b = core.AppendJSONString(b, r.RerankReason)
	}
	return append(b, '}'), ok
}

func appendHitJSON(b []byte, h *SearchHit) ([]byte, bool) {
	b = append(b, `{"memory":`...)
	b, ok := appendMemoryJSON(b, &h.Memory)
	for _, f := range [...]struct {
		name string
		v    float64
	}{{`,"score":`, h.Score}, {`,"vectorScore":`, h.VectorScore}, {`,"textScore":`, h.TextScore}, {`,"decayScore":`, h.DecayScore}} {
		b = append(b, f.name...)
		b = appendFloat(b, f.v, &ok)
	}
	if h.RerankScore != nil {
		b = append(b, `,"rerankScore":`...)
		b = appendFloat(b, *h.RerankScore, &ok)
	}
	return append(b, '}'), ok
}

// appendMemoryJSON appends m as Marshal writes a Memory (write/types.go:
// the same fields in the same order).
func appendMemoryJSON(b []byte, m *Memory) ([]byte, bool) {
	ok := true
	b = core.AppendJSONStringField(b, `{"id":`, m.ID)
	b = core.AppendJSONStringField(b, `,"owner":`, m.Owner)
	b = core.AppendJSONOptString(b, `,"agent":`, m.Agent)
	b = core.AppendJSONOptString(b, `,"session":`, m.Session)
	b = core.AppendJSONOptString(b, `,"sourceSession":`, m.SourceSession)
	b = core.AppendJSONStringField(b, `,"source":`, string(m.Source))
	b = core.AppendJSONStringField(b, `,"category":`, m.Category)
	b = core.AppendJSONStringField(b, `,"content":`, m.Content)
	b = core.AppendJSONIntField(b, `,"importance":`, int64(m.Importance))
	b = core.AppendJSONOptStrings(b, `,"flags":`, m.Flags)
	b = append(b, `,"active":`...)
	b = strconv.AppendBool(b, m.Active)
	b = core.AppendJSONOptString(b, `,"supersededBy":`, m.SupersededBy)
	if m.ExpiresAt != nil {
		b = core.AppendJSONTimeField(b, `,"expiresAt":`, *m.ExpiresAt, &ok)
	}
	b = core.AppendJSONTimeField(b, `,"createdAt":`, m.CreatedAt, &ok)
	b = core.AppendJSONTimeField(b, `,"updatedAt":`, m.UpdatedAt, &ok)
	if m.LastAccessedAt != nil {
		b = core.AppendJSONTimeField(b, `,"lastAccessedAt":`, *m.LastAccessedAt, &ok)
	}
	b = core.AppendJSONIntField(b, `,"accessCount":`, m.AccessCount)
	if len(m.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		var rawOK bool
		if b, rawOK = core.AppendJSONRaw(b, m.Metadata); !rawOK {
			ok = false
		}
	}
	b = core.AppendJSONOptStrings(b, `,"tags":`, m.Tags)
	if m.Withheld {
		b = append(b, `,"withheld":true`...)
	}
	return append(b, '}'), ok
}

func appendFloat(b []byte, f float64, ok *bool) []byte {
	b, fine := core.AppendJSONFloat(b, f)
	if !fine {
		*ok = false
	}
	return b
}
