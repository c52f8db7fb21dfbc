-- On Citus only: add_memory runs a plain add (the owner's lock, the
-- neighbour lookup and, when no memory is close enough to decide on, the
-- insert, its history row and the owner's row count) as one call that
-- Citus delegates to the worker holding the tenant's schema (issue 30).
-- Through the coordinator the same add was seven round trips from the
-- coordinator to the worker (BEGIN, lock, lookup, the insert's three
-- parts, COMMIT) and ran at 0.36-0.49 of plain PostgreSQL's throughput.
--
-- It is the memory engine's add path, written once more in PL/pgSQL
-- (internal/memory/citusadd.go calls it and says what must stay equal):
-- the lookup is nearestSQL / legacyNearestSQL, the insert InsertQuery. It
-- returns no row when the nearest memory is identical or at least as
-- similar as the arbitration threshold: the engine then runs its own
-- transaction (merge, arbitration, no-op), so this function never decides
-- anything but "insert". SECURITY INVOKER (the default): it runs with the
-- privileges of the login role that calls it, and nothing in it is built
-- from its arguments. search_path is pinned: pg_catalog first, then the
-- schema of pgvector (its type and operators), every table qualified.
--
-- The history row's id is an argument, taken from the coordinator's
-- sequence like every other history row's: a worker numbers identity
-- columns from a range of its own (its group id << 48), and a move to
-- another worker would change the range, so ids drawn on the worker would
-- break the order of a memory's history (which the history API and its
-- pruning read by id).
--
-- The caller's lock_timeout is an argument too: the session Citus opens on
-- the worker has the role's settings, not the service's.
--
-- Plain PostgreSQL gets nothing here: the engine's statements are two
-- round trips there and the benchmark compares them with its raw side.
{{- if .Citus}}
CREATE FUNCTION {{.Schema}}.add_memory(
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
BEGIN
    -- The caller's lock_timeout: the worker's session has the role's.
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    INSERT INTO {{.Schema}}.owner_locks AS l (owner_id) VALUES (p_owner)
        ON CONFLICT (owner_id) DO UPDATE SET owner_id = excluded.owner_id WHERE false;
{{- if .OwnerVectors}}
    WITH c AS MATERIALIZED (
        (SELECT m.id FROM {{.Schema}}.memories AS m
            WHERE m.owner_id = p_owner AND m.active AND m.superseded_by IS NULL
            ORDER BY m.embedding <=> p_embedding LIMIT 1)
        UNION ALL
        (SELECT m.id FROM {{.Schema}}.memories AS m
            WHERE m.owner_id = p_owner AND m.active AND m.superseded_by IS NULL
            AND md5(m.content) = md5(p_content) AND m.content = p_content LIMIT 1)
        UNION ALL
        (SELECT m.id FROM {{.Schema}}.memories AS m
            WHERE m.owner_id = p_owner AND m.deactivated_at IS NOT NULL AND m.superseded_by IS NULL
            AND m.deactivated_at >= v_kept
            ORDER BY m.embedding <=> p_embedding LIMIT 1)
        UNION ALL
        (SELECT m.id FROM {{.Schema}}.memories AS m
            WHERE m.owner_id = p_owner AND m.deactivated_at IS NOT NULL AND m.superseded_by IS NULL
            AND m.deactivated_at >= v_kept
            AND m.content = p_content LIMIT 1))
    SELECT 1 - (m.embedding <=> p_embedding), m.content = p_content INTO v_sim, v_exact
    FROM {{.Schema}}.memories AS m
    WHERE m.id IN (SELECT id FROM c)
    ORDER BY m.content = p_content DESC, (m.content = p_content AND NOT m.active), m.embedding <=> p_embedding, m.id
    LIMIT 1;
{{- else}}
    SELECT 1 - (m.embedding <=> p_embedding), m.content = p_content INTO v_sim, v_exact
    FROM {{.Schema}}.memories AS m
    WHERE m.owner_id = p_owner AND m.superseded_by IS NULL
        AND NOT (NOT m.active AND m.deactivated_at < v_kept)
    ORDER BY m.content = p_content DESC, (m.content = p_content AND NOT m.active), m.embedding <=> p_embedding, m.id
    LIMIT 1;
{{- end}}
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

SELECT create_distributed_function('{{.Schema}}.add_memory(uuid, text, text, text, text, text, text, integer, {{.Vector}}, text[], float8, jsonb, text, text, float8, float8, bigint, text)',
    colocate_with := '{{.Schema}}.memories');
{{- end}}
