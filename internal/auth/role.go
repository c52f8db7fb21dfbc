package auth

import (
	"fmt"
	"time"
)

// Role is what a credential may do. Each role includes the one below it:
// admin ⊇ app ⊇ agent.
type Role string

// Roles of a credential.
const (
	// RoleAgent: an AI agent. Every write it makes has source "agent"; it
	// may not erase owners and never sees memories the injection guard flagged.
	RoleAgent Role = "agent"
	// RoleApp: an application backend. It may assert source "user" (what
	// the end user said) and mint agent tokens.
	RoleApp Role = "app"
	// RoleAdmin: operations. Everything, erasing owners included.
	RoleAdmin Role = "admin"
)

// rank orders the roles; 0 is no role.
func (r Role) rank() int {
	switch r {
	case RoleAgent:
		return 1
	case RoleApp:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Includes reports whether r may do what min may.
func (r Role) Includes(min Role) bool { return r.rank() > 0 && r.rank() >= min.rank() }

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if r.rank() == 0 {
		return "", fmt.Errorf("role %q must be admin, app or agent", s)
	}
	return r, nil
}

// Credential is who a request speaks for.
type Credential struct {
	Role Role
	// Owner, when set, is the one owner the credential may act for.
	Owner string
	// ID is the identity recorded in history (memory_history.actor_id): a
	// static token's name, "token:" and a digest prefix for a nameless
	// one, or a signed token's subject.
	ID string
	// Expires is when a signed token stops working (zero for static tokens).
	Expires time.Time
}

// MayActFor reports whether the credential may act for owner.
func (c Credential) MayActFor(owner string) bool { return c.Owner == "" || c.Owner == owner }
