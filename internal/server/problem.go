package server

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/engram-dev/engram/internal/memory"
)

// ProblemBase prefixes every problem type URI. The URIs are identifiers
// (stable across releases, listed in docs/api.md); clients switch on them.
const ProblemBase = "https://engram.dev/problems/"

// Problem kinds: one stable type URI per kind of error. The status is fixed
// per kind so a client can rely on either.
type problemKind struct {
	slug   string
	status int
	title  string
}

var (
	probMalformed        = problemKind{"malformed-request", http.StatusBadRequest, "Malformed request"}
	probBatch            = problemKind{"batch-not-supported", http.StatusBadRequest, "JSON-RPC batch not supported"}
	probUnauth           = problemKind{"unauthorized", http.StatusUnauthorized, "Missing or invalid bearer token"}
	probForbidden        = problemKind{"forbidden", http.StatusForbidden, "Not allowed for this token's role"}
	probOwnerNotAllowed  = problemKind{"owner-not-allowed", http.StatusForbidden, "Owner not allowed for this token"}
	probSourceNotAllowed = problemKind{"source-not-allowed", http.StatusForbidden, "Source not allowed for this token"}
	probProtected        = problemKind{"protected", http.StatusForbidden, "Protected category"}
	probNotFound         = problemKind{"not-found", http.StatusNotFound, "Not found"}
	probNoRoute          = problemKind{"route-not-found", http.StatusNotFound, "No such route"}
	probMethod           = problemKind{"method-not-allowed", http.StatusMethodNotAllowed, "Method not allowed"}
	probConflict         = problemKind{"conflict", http.StatusConflict, "Conflict"}
	probLocked           = problemKind{"locked", http.StatusConflict, "Maintenance lock held"}
	probNoLLM            = problemKind{"no-llm", http.StatusConflict, "No LLM configured"}
	probNoSigningKey     = problemKind{"no-signing-key", http.StatusConflict, "No signing key"}
	probTooLarge         = problemKind{"payload-too-large", http.StatusRequestEntityTooLarge, "Request body too large"}
	probMediaType        = problemKind{"unsupported-media-type", http.StatusUnsupportedMediaType, "Unsupported media type"}
	probValidation       = problemKind{"validation", http.StatusUnprocessableEntity, "Invalid input"}
	probQuota            = problemKind{"quota-exceeded", http.StatusConflict, "Quota exceeded"}
	probTurnTooLong      = problemKind{"turn-too-long", http.StatusUnprocessableEntity, "Turn too long"}
	probOverloaded       = problemKind{"overloaded", http.StatusTooManyRequests, "Server overloaded"}
	probRateLimited      = problemKind{"rate-limited", http.StatusTooManyRequests, "Rate limit exceeded"}
	probInternal         = problemKind{"internal", http.StatusInternalServerError, "Internal server error"}
	probUpstream         = problemKind{"upstream", http.StatusBadGateway, "Embedding or LLM API failed"}
	probUnavailable      = problemKind{"unavailable", http.StatusServiceUnavailable, "Service unavailable"}
)

// allProblemKinds lists every kind, for the docs test.
var allProblemKinds = []problemKind{probMalformed, probUnauth, probForbidden, probOwnerNotAllowed,
	probSourceNotAllowed, probProtected, probNotFound, probNoRoute, probMethod, probConflict, probLocked, probNoLLM,
	probNoSigningKey, probTooLarge, probMediaType, probValidation, probOverloaded, probRateLimited, probInternal,
	probUpstream, probUnavailable, probQuota, probTurnTooLong, probBatch}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	// RequestID is the X-Request-Id of the request, to find it in the logs.
	RequestID string `json:"requestId,omitempty"`
	// Errors lists the invalid fields of a validation problem.
	Errors []memory.FieldError `json:"errors,omitempty"`
	// *QuotaMembers are the extension members of quota-exceeded and
	// turn-too-long (nil, and absent from JSON, otherwise).
	*QuotaMembers

	allow string // Allow header of a 405
	// retryAfter is the Retry-After of a 429 or 503 in seconds (0: retryAfterSeconds).
	retryAfter int
}

// QuotaMembers name the quota a write would pass and the counts.
type QuotaMembers struct {
	// Quota is the policy field, e.g. "limits.maxSessionsPerOwner".
	Quota string `json:"quota"`
	// Limit is its value, Current what is stored now (of the turn, for a
	// turn limit) and Requested what the refused request would add.
	Limit     int64 `json:"limit"`
	Current   int64 `json:"current"`
	Requested int64 `json:"requested"`
}

// quotaProblem is the problem of a write refused by a quota: 422 for the
// length of a turn (the append is wrong for the turn; a new turn is the
// remedy), 409 for what an owner or a session holds.
func quotaProblem(e *memory.QuotaError) *Problem {
	k := probQuota
	if e.TurnLength() {
		k = probTurnTooLong
	}
	p := newProblem(k, e.Error())
	p.QuotaMembers = &QuotaMembers{Quota: e.Quota, Limit: e.Limit, Current: e.Current, Requested: e.Requested}
	return p
}

func newProblem(k problemKind, detail string) *Problem {
	return &Problem{Type: ProblemBase + k.slug, Title: k.title, Status: k.status, Detail: detail}
}

// writeProblem answers with p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	p.Instance = r.URL.Path
	p.RequestID = w.Header().Get(headerRequestID)
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="engram"`)
	}
	if p.allow != "" {
		w.Header().Set("Allow", p.allow)
	}
	if p.Status == http.StatusTooManyRequests || p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(cmp.Or(p.retryAfter, retryAfterSeconds)))
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: Problem holds only strings and ints
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// retryAfterSeconds is the Retry-After of 429 and 503 answers: long enough
// for a burst to pass, short enough not to stall a well-behaved client.
const retryAfterSeconds = 1

// validationProblem is a 422 listing fields.
func validationProblem(fields ...memory.FieldError) *Problem {
	p := newProblem(probValidation, "")
	p.Errors = fields
	if len(fields) == 1 {
		p.Detail = fields[0].Field + ": " + fields[0].Message
	} else {
		p.Detail = strconv.Itoa(len(fields)) + " fields are invalid; see errors"
	}
	return p
}

func fieldErr(field, msg string) memory.FieldError {
	return memory.FieldError{Field: field, Message: msg}
}
