-- Locks of the tenant's own. Advisory locks live in one keyspace per
-- database that every role can take, so another tenant's login role could
-- hold the keys this tenant's writers wait on. Row locks on tables in this
-- schema can only be taken by roles with UPDATE on them: this tenant's.
--   owner_locks: one row per owner, locked FOR UPDATE by every write that
--                must be serialized per owner (add with dedup, compact, erase).
--   job_locks:   one row per maintenance lock, held as a lease (holder and
--                expiry set and renewed in short transactions), so two runs
--                of one tenant never overlap, no transaction stays open for a
--                whole run (VACUUM keeps working) and a killed run's lease
--                simply expires.
CREATE TABLE {{.Schema}}.owner_locks (
    owner_id text PRIMARY KEY
);

CREATE TABLE {{.Schema}}.job_locks (
    name       text PRIMARY KEY,
    holder     text,
    expires_at timestamptz
);
INSERT INTO {{.Schema}}.job_locks (name) VALUES ('maintenance');

-- Who wrote a history row: the identity of the credential (a token's name or
-- a signed token's subject), beside actor (the role: user, agent, system, job).
-- A constant default makes this a catalog-only change, also on large tables.
ALTER TABLE {{.Schema}}.memory_history ADD COLUMN actor_id text NOT NULL DEFAULT '';
