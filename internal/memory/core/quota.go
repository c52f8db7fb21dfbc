package core

import (
	"context"
	"fmt"
)

// Quotas of the policy: the names a QuotaError carries are the policy
// fields, as a MemoryPolicy spells them.
const (
	QuotaSessionsPerOwner   = "limits.maxSessionsPerOwner"
	QuotaEpisodesPerOwner   = "limits.maxEpisodesPerOwner"
	QuotaDocumentsPerOwner  = "limits.maxDocumentsPerOwner"
	QuotaMessagesPerSession = "conversation.limits.maxMessagesPerSession"
	QuotaTurnMessages       = "conversation.limits.maxTurnMessages"
	QuotaTurnTokens         = "conversation.limits.maxTurnTokens"
)

// QuotaError: a write would take an owner, a session or a turn past a quota
// of the policy. It is decided inside the write's transaction, under the
// lock that serializes the writes it counts, and nothing of the write is
// stored.
type QuotaError struct {
	// Quota is the policy field (QuotaSessionsPerOwner, ...).
	Quota string
	// Limit is the quota's value, Current what is stored now (of the turn
	// the write would extend, for a turn quota) and Requested what the
	// refused write would add.
	Limit, Current, Requested int64
	// Unit names what is counted ("sessions", "messages", "tokens", ...)
	// and Holder what holds it ("the owner", "the session", "the turn").
	Unit, Holder string
	// Remedy tells the client what to do instead.
	Remedy string
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s: %s has %d %s and %d more would pass the limit of %d; %s",
		e.Quota, e.Holder, e.Current, e.Unit, e.Requested, e.Limit, e.Remedy)
}

// TurnLength reports whether the quota bounds the length of one turn: the
// refused append is wrong for the turn as it stands (a client must start a
// new turn), not for what the owner or the session holds.
func (e *QuotaError) TurnLength() bool {
	return e.Quota == QuotaTurnMessages || e.Quota == QuotaTurnTokens
}

// OneMoreOwnerRow refuses one more row of owner in table (unit names the
// rows, "episodes") when the owner holds limit of them already: a
// QuotaError of quota held by "the owner", with remedy. The caller holds
// the owner's lock when the count must stand until its insert.
func OneMoreOwnerRow(ctx context.Context, q Querier, table, owner, quota string, limit int, unit, remedy string) error {
	n, err := CountOwnerRows(ctx, q, table, unit, owner)
	if err != nil {
		return err
	}
	return OverQuota(quota, limit, n, 1, unit, "the owner", remedy)
}

// OverQuota returns a QuotaError when current + requested passes limit.
func OverQuota(quota string, limit int, current, requested int64, unit, holder, remedy string) error {
	if current+requested <= int64(limit) {
		return nil
	}
	return &QuotaError{Quota: quota, Limit: int64(limit), Current: current, Requested: requested,
		Unit: unit, Holder: holder, Remedy: remedy}
}
