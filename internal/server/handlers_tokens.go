package server

import (
	"fmt"
	"time"

	"github.com/engram-dev/engram/internal/auth"
	"github.com/engram-dev/engram/internal/memory"
)

// defaultMintTTL is the lifetime of a minted token when the request names none.
const defaultMintTTL = time.Hour

type mintBody struct {
	Owner   string `json:"owner"`
	Subject string `json:"subject"`
	TTL     string `json:"ttl,omitempty"`
}

type mintResponse struct {
	Token     string    `json:"token"`
	Role      auth.Role `json:"role"`
	Owner     string    `json:"owner"`
	Subject   string    `json:"subject"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// mintToken: POST /v1/tokens, app and admin tokens. It mints a signed agent
// token bound to one owner with the service's signing key, for a backend
// that holds an app token but not the key. An app token bound to an owner
// mints only for that owner: minting never widens what a credential reaches.
func (a rest) mintToken(c *call, b *mintBody) (reply, error) {
	ttl, p := b.validate()
	if p != nil {
		return reply{}, problemError{p}
	}
	if !c.credential().MayActFor(b.Owner) {
		return reply{}, problemError{ownerNotAllowed()}
	}
	key := a.tokens.SigningKeys().MintKey()
	if key == nil {
		return reply{}, problemError{newProblem(probNoSigningKey,
			"the service has no signing key (the signing-key of the <runtime>-api-token Secret, --signing-key-file), so it cannot mint")}
	}
	// The subject is namespaced by the minter's identity, so a minted token
	// can never write history under another credential's name.
	subject := c.credential().ID + "/" + b.Subject
	if err := auth.CheckIdentity(subject); err != nil {
		return reply{}, problemError{validationProblem(fieldErr("subject",
			"too long once prefixed with the minting token's identity and a slash: at most 128 characters in all"))}
	}
	now := time.Now()
	token, err := auth.MintAgent(key, b.Owner, subject, ttl, now)
	if err != nil { // cannot happen: the body was validated
		return reply{}, fmt.Errorf("minting a token: %w", err)
	}
	return created(mintResponse{Token: token, Role: auth.RoleAgent, Owner: b.Owner, Subject: subject,
		ExpiresAt: time.Unix(now.Add(ttl).Unix(), 0).UTC()}, ""), nil
}

// validate checks the body and returns the token's lifetime.
func (b *mintBody) validate() (time.Duration, *Problem) {
	var errs []memory.FieldError
	if !memory.ValidScopeID(b.Owner) {
		errs = append(errs, fieldErr("owner", "required: the owner id the token is bound to (letters, digits and . _ : @ + -, at most 256)"))
	}
	if err := auth.CheckIdentity(b.Subject); err != nil {
		errs = append(errs, fieldErr("subject", "required: the identity history records for the token's writes; "+err.Error()))
	}
	ttl := defaultMintTTL
	if b.TTL != "" {
		d, err := time.ParseDuration(b.TTL)
		if err != nil || d < time.Minute || d > auth.MaxSignedTTL {
			errs = append(errs, fieldErr("ttl", "must be a duration from 1m to 24h, such as 15m or 2h"))
		}
		ttl = d
	}
	if len(errs) > 0 {
		return 0, validationProblem(errs...)
	}
	return ttl, nil
}
