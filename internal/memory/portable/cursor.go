package portable

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/engram-dev/engram/internal/memory/core"
	"github.com/engram-dev/engram/internal/memory/write"
)

// cursor is a position in an export: the owner being written, the index
// of its kind (in RecordKinds) and the key of the last row written of that
// kind (nil: none yet). It travels base64url-encoded and is opaque to
// clients; it holds per-tenant keys (history and changelog ids), so it
// only resumes an export of the tenant that gave it.
type cursor struct {
	Owner string   `json:"o"`
	Kind  int      `json:"k"`
	Key   []string `json:"a,omitempty"`
}

var errCursor = errors.New("is not a cursor this export gave (take it from a checkpoint or trailer line)")

func (c cursor) encode() string {
	b, _ := json.Marshal(c) // strings and an int: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads s ("" is the start), checking it against the kinds.
func decodeCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) > 4096 {
		return cursor{}, errCursor
	}
	var c cursor
	if err := json.Unmarshal(raw, &c); err != nil || c.Owner == "" || c.Kind < 0 || c.Kind >= len(RecordKinds) {
		return cursor{}, errCursor
	}
	return c, nil
}

// validFor checks the cursor's owner and key against the key types of
// its kind, so a forged cursor is refused before the export starts rather
// than failing a query halfway (a cast error cuts the stream).
func (c cursor) validFor(k *kindSpec) bool {
	if c.Owner != write.GlobalOwner && !core.ValidScopeID(c.Owner) {
		return false
	}
	if c.Key == nil {
		return true
	}
	if len(c.Key) != len(k.keyTypes) {
		return false
	}
	for i, v := range c.Key {
		switch k.keyTypes[i] {
		case "uuid":
			if !core.ValidID(v) {
				return false
			}
		case "bigint":
			if _, err := strconv.ParseInt(v, 10, 64); err != nil {
				return false
			}
		case "integer":
			if _, err := strconv.ParseInt(v, 10, 32); err != nil {
				return false
			}
		default: // text: ids of the scope and document types, never NUL
			if len(v) > 256 || strings.ContainsRune(v, 0) || !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }
