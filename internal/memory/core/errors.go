package core

import (
	"errors"
	"fmt"
	"strings"
)

// Errors the service maps to HTTP statuses (with errors.Is).
var (
	// ErrNotFound: the owner has no memory with that id (another owner's
	// memory is not found either: ids never leak across owners).
	ErrNotFound = errors.New("memory not found")
	// ErrProtected: the memory's category is protected and the source is not "user".
	ErrProtected = errors.New("category is protected: only source \"user\" may change it")
	// ErrConflict: the change would break an invariant (e.g. a supersede cycle).
	ErrConflict = errors.New("conflict")
	// ErrNoLLM: the operation needs an LLM and the runtime has none.
	ErrNoLLM = errors.New("no LLM is configured for this runtime")
	// ErrUnavailable: the database (or another dependency) cannot be reached.
	ErrUnavailable = errors.New("database unavailable")
	// ErrLocked: another maintenance run holds the tenant's job lock.
	ErrLocked = errors.New("another maintenance run holds the lock")
	// ErrBusy: a lock wait or a statement ran out of its time
	// (lock_timeout, statement_timeout) or lost a deadlock. Retrying later
	// is the remedy, so it also matches ErrUnavailable: the service
	// answers 503 with Retry-After, not 500.
	ErrBusy error = busyError{}
	// ErrLeaseLost: a maintenance run could not renew its lease in time, so
	// another run may have taken it over; the run stops.
	ErrLeaseLost = errors.New("the maintenance lease was lost (not renewed in time)")
)

// ConflictError is an ErrConflict that says what conflicts (errors.Is(err,
// ErrConflict) holds); the service shows Detail to the client.
type ConflictError struct{ Detail string }

func (e *ConflictError) Error() string { return ErrConflict.Error() + ": " + e.Detail }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Conflictf returns a *ConflictError whose Detail is formatted like fmt.Sprintf.
func Conflictf(format string, args ...any) error {
	return &ConflictError{Detail: fmt.Sprintf(format, args...)}
}

// RuleError is an ErrProtected refused by a rule of its own rather than
// the protected category's (who may write a global category); the
// service shows Rule to the client. errors.Is(err, ErrProtected) holds.
type RuleError struct{ Rule string }

func (e *RuleError) Error() string { return e.Rule + ": " + ErrProtected.Error() }

// Is makes errors.Is(err, ErrProtected) true.
func (e *RuleError) Is(target error) bool { return target == ErrProtected }

type busyError struct{}

func (busyError) Error() string {
	return "database busy: a lock wait or a statement timed out; retry later"
}

// Is makes errors.Is(ErrBusy, ErrUnavailable) true.
func (busyError) Is(target error) bool { return target == ErrUnavailable }

// FieldError is one invalid input field.
type FieldError struct {
	// Field is the JSON name of the field, e.g. "content" or "items[3].importance".
	Field string `json:"field"`
	// Message says what is wrong, for humans.
	Message string `json:"message"`
}

// ValidationError lists every invalid field of a request.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Invalid returns a ValidationError for one field.
func Invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Fields: []FieldError{{Field: field, Message: fmt.Sprintf(format, args...)}}}
}

// IsValidation reports whether err is a ValidationError and returns it.
func IsValidation(err error) (*ValidationError, bool) {
	var v *ValidationError
	ok := errors.As(err, &v)
	return v, ok
}
