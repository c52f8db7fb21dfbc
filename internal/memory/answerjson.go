package memory

import (
	"strconv"
	"time"

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
	if r.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Results {
			if i > 0 {
				b = append(b, ',')
			}
			var hitOK bool
			if b, hitOK = appendHitJSON(b, &r.Results[i]); !hitOK {
				ok = false
			}
		}
		b = append(b, ']')
	}
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
	b = append(b, `{"id":`...)
	b = core.AppendJSONString(b, m.ID)
	b = append(b, `,"owner":`...)
	b = core.AppendJSONString(b, m.Owner)
	b = appendOptString(b, `,"agent":`, m.Agent)
	b = appendOptString(b, `,"session":`, m.Session)
	b = appendOptString(b, `,"sourceSession":`, m.SourceSession)
	b = append(b, `,"source":`...)
	b = core.AppendJSONString(b, string(m.Source))
	b = append(b, `,"category":`...)
	b = core.AppendJSONString(b, m.Category)
	b = append(b, `,"content":`...)
	b = core.AppendJSONString(b, m.Content)
	b = append(b, `,"importance":`...)
	b = strconv.AppendInt(b, int64(m.Importance), 10)
	b = appendOptStrings(b, `,"flags":`, m.Flags)
	b = append(b, `,"active":`...)
	b = strconv.AppendBool(b, m.Active)
	b = appendOptString(b, `,"supersededBy":`, m.SupersededBy)
	if m.ExpiresAt != nil {
		b = appendTime(b, `,"expiresAt":`, *m.ExpiresAt, &ok)
	}
	b = appendTime(b, `,"createdAt":`, m.CreatedAt, &ok)
	b = appendTime(b, `,"updatedAt":`, m.UpdatedAt, &ok)
	if m.LastAccessedAt != nil {
		b = appendTime(b, `,"lastAccessedAt":`, *m.LastAccessedAt, &ok)
	}
	b = append(b, `,"accessCount":`...)
	b = strconv.AppendInt(b, m.AccessCount, 10)
	if len(m.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		var rawOK bool
		if b, rawOK = core.AppendJSONRaw(b, m.Metadata); !rawOK {
			ok = false
		}
	}
	b = appendOptStrings(b, `,"tags":`, m.Tags)
	if m.Withheld {
		b = append(b, `,"withheld":true`...)
	}
	return append(b, '}'), ok
}

func appendOptString(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return core.AppendJSONString(append(b, name...), v)
}

func appendOptStrings(b []byte, name string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = append(append(b, name...), '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = core.AppendJSONString(b, v)
	}
	return append(b, ']')
}

func appendFloat(b []byte, f float64, ok *bool) []byte {
	b, fine := core.AppendJSONFloat(b, f)
	if !fine {
		*ok = false
	}
	return b
}

func appendTime(b []byte, name string, t time.Time, ok *bool) []byte {
	b, fine := core.AppendJSONTime(append(b, name...), t)
	if !fine {
		*ok = false
	}
	return b
}
