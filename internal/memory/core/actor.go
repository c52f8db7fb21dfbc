package core

import "context"

// The actor of a write is who made it: Source says what kind of writer
// (user, agent, system, job), the actor id says which one (the service puts
// the identity of the request's credential here). It travels in the
// context, like a request's deadline, so that every write path, including
// the ones the dedup and the arbiter choose, records it in history without
// each request type carrying it.

type actorKey struct{}

// WithActor returns ctx carrying the identity recorded as
// memory_history.actor_id by the writes made with it.
func WithActor(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, actorKey{}, id)
}

// ActorID is the identity carried by ctx, "" when none (jobs, tests).
func ActorID(ctx context.Context) string {
	id, _ := ctx.Value(actorKey{}).(string)
	return id
}
