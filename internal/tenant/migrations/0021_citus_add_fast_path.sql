-- On Citus only, for tenants whose vectors take the owner-local path
-- (migration 12's covering index): add_memory of migration 15 with its
-- neighbour lookup written as single-table statements (issue 30).
--
-- Migration 15's lookup was one statement, a CTE of four UNION ALL parts
-- and a final pick. Citus plans a statement of a function on the worker
-- again on every call unless it is a "fast path" query (one table, no CTE,
-- no subquery, no UNION), whose local plan it keeps. The four candidates
-- (the nearest active memory, an active one of the same text, the nearest
-- and the same text among the deactivated memories still kept) are now
-- four such statements, and the pick among them a fifth: the same rows,
-- the same order, the same answer (a candidate that is not found is NULL
-- and matches nothing, as a missing row of the CTE did). A pgbench of the
-- call through the coordinator measured 0.1-1.0 ms (median 0.4) less
-- worker CPU per add and 7-33 % more adds per second (docs/scale-out.md).
--
-- The signature, the result and everything else are migration 15's, so
-- CREATE OR REPLACE keeps the function distributed and delegated (Citus
-- propagates the new body to the workers). Without the covering index the
-- lookup of migration 15 is already one single-table statement: those
-- tenants, and plain PostgreSQL, get nothing here.
{{- if and .Citus .OwnerVectors}}
CREATE OR REPLACE FUNCTION {{.Schema}}.add_memory(
    p_id uuid, p_owner text, p_agent text, p_session text, p_source text, p_category text,
    p_content text, p_importance integer, p_embedding {{.Vector}}, p_flags text[], p_ttl float8,
    p_details jsonb, p_actor_id text, p_source_session text,
    p_arbitration float8, p_kept_secs float8, p_history_id bigint, p_lock_timeout text)
RETURNS TABLE (
    r_id text, r_owner_id text, r_agent_id text, r_session_id text, r_source_session text,
    r_source text, r_category text, r_content text, r_importance smallint, r_flags text[],
    r_active boolean, r_superseded_by text, r_expires_at timestamptz, r_created_at timestamptz,
    r_updated_at timestamptz, r_last_accessed_at timestamptz, r_access_count bigint,
    r_owner_rows bigint, r_similarity float8)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, {{.ExtSchema}}, pg_temp
AS $fn$
DECLARE
    v_kept timestamptz := now() - make_interval(secs => p_kept_secs);
    v_sim float8;
    v_exact boolean;
    v_found boolean;
    v_rows bigint;
    v_c1 uuid;
    v_c2 uuid;
    v_c3 uuid;
    v_c4 uuid;
BEGIN
    -- The caller's lock_timeout: the worker's session has the role's.
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    INSERT INTO {{.Schema}}.owner_locks AS l (owner_id) VALUES (p_owner)
        ON CONFLICT (owner_id) DO UPDATE SET owner_id = excluded.owner_id WHERE false;

    -- The lookup of migration 15 as single-table statements: Citus runs
    -- each as a "fast path" query and keeps its local plan on the worker,
    -- where it re-planned the CTE of migration 15 on every call.
    SELECT m.id INTO v_c1 FROM {{.Schema}}.memories AS m
        WHERE m.owner_id = p_owner AND m.active AND m.superseded_by IS NULL
        ORDER BY m.embedding <=> p_embedding LIMIT 1;
    SELECT m.id INTO v_c2 FROM {{.Schema}}.memories AS m
        WHERE m.owner_id = p_owner AND m.active AND m.superseded_by IS NULL
        AND md5(m.content) = md5(p_content) AND m.content = p_content LIMIT 1;
    SELECT m.id INTO v_c3 FROM {{.Schema}}.memories AS m
        WHERE m.owner_id = p_owner AND m.deactivated_at IS NOT NULL AND m.superseded_by IS NULL
        AND m.deactivated_at >= v_kept
        ORDER BY m.embedding <=> p_embedding LIMIT 1;
    SELECT m.id INTO v_c4 FROM {{.Schema}}.memories AS m
        WHERE m.owner_id = p_owner AND m.deactivated_at IS NOT NULL AND m.superseded_by IS NULL
        AND m.deactivated_at >= v_kept
        AND m.content = p_content LIMIT 1;
    SELECT 1 - (m.embedding <=> p_embedding), m.content = p_content INTO v_sim, v_exact
    FROM {{.Schema}}.memories AS m
    WHERE m.id = ANY (ARRAY[v_c1, v_c2, v_c3, v_c4])
    ORDER BY m.content = p_content DESC, (m.content = p_content AND NOT m.active), m.embedding <=> p_embedding, m.id
    LIMIT 1;
    v_found := FOUND;
    IF v_found AND (v_exact OR v_sim >= p_arbitration) THEN
        RETURN; -- a neighbour to decide on: the engine's transaction does
    END IF;
    v_sim := CASE WHEN v_found THEN v_sim ELSE 0 END;
    INSERT INTO {{.Schema}}.memories AS m (id, owner_id, agent_id, session_id, source, category, content,
            importance, embedding, flags, expires_at, source_session)
        VALUES (p_id, p_owner, p_agent, p_session, p_source, p_category, p_content,
            p_importance, p_embedding, p_flags,
            now() + make_interval(secs => CASE WHEN p_ttl > 0 THEN p_ttl END), p_source_session)
        RETURNING m.id::text, m.owner_id, m.agent_id, m.session_id, m.source_session, m.source, m.category,
            m.content, m.importance, m.flags, m.active, m.superseded_by::text, m.expires_at, m.created_at,
            m.updated_at
        INTO r_id, r_owner_id, r_agent_id, r_session_id, r_source_session, r_source, r_category,
            r_content, r_importance, r_flags, r_active, r_superseded_by, r_expires_at, r_created_at,
            r_updated_at;
    INSERT INTO {{.Schema}}.memory_history (id, memory_id, owner_id, action, actor, actor_id, new_content, details)
        OVERRIDING SYSTEM VALUE
        VALUES (p_history_id, p_id, p_owner, 'add', p_source, p_actor_id, p_content,
            jsonb_build_object('similarity', v_sim) || p_details);
    SELECT count(*) INTO v_rows FROM {{.Schema}}.memories AS m WHERE m.owner_id = p_owner;
    r_last_accessed_at := NULL;
    r_access_count := 0;
    r_owner_rows := v_rows;
    r_similarity := v_sim;
    RETURN NEXT;
END
$fn$;
{{- end}}
