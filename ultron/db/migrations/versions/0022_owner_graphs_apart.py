"""The owners' vector graphs move off ``memory_records``: into ``memory_owner_vectors``
(scope, id, embedding in half precision), LIST-partitioned by scope, one partition and one
HNSW index per owner (``ultron.db.vector_indexes`` says why: the planner weighed each partial index of
0017 for every statement on the memories, the unfiltered search included).

* ``memory_owner_scopes(agent_id, tags, shared, status)``: the scopes a memory belongs to.
* The trigger ``memory_owner_vectors_sync`` keeps the partitions in line with the memories
  on every insert, delete, and update of an owner, a tag, the status or the vector (a hit
  count's update does not fire it); a TRUNCATE of the memories empties them too.
* Upgrading replaces each recorded partial index with its partition; downgrading builds the
  partial indexes again from the recorded scopes and drops the partitioned table.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-29
"""

from alembic import op

from ultron.db import vector_indexes as vi

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_FUNCTIONS = r"""
CREATE FUNCTION memory_owner_scopes(agent_id text, tags text[], shared boolean, status text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN status = 'active' THEN
        ARRAY(SELECT 'agent:' || agent_id WHERE agent_id IS NOT NULL
              UNION SELECT 'shared' WHERE shared
              UNION SELECT 'tag:' || t FROM unnest(tags) t WHERE t IS NOT NULL)
    ELSE '{}'::text[] END
$$
;;
CREATE FUNCTION memory_owner_vectors_sync() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    before text[] := '{}';
    after text[] := '{}';
    graph record;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        before := memory_owner_scopes(OLD.agent_id, OLD.tags, OLD.shared, OLD.status);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.embedding IS NOT NULL THEN
        after := memory_owner_scopes(NEW.agent_id, NEW.tags, NEW.shared, NEW.status);
    END IF;
    IF TG_OP = 'UPDATE' AND before = after AND OLD.embedding IS NOT DISTINCT FROM NEW.embedding THEN
        RETURN NULL;
    END IF;
    -- Each partition by its name: through the partitioned table, a DELETE planned once for
    -- any scopes locked and searched every partition (no pruning of "scope = ANY($1)").
    -- Only the recorded scopes have one: a scope is recorded when its partition is attached.
    FOR graph IN SELECT scope, index_name FROM memory_vector_indexes WHERE scope = ANY(before) LOOP
        EXECUTE format('DELETE FROM %I WHERE scope = $1 AND id = $2', graph.index_name) USING graph.scope, OLD.id;
    END LOOP;
    FOR graph IN SELECT scope, index_name FROM memory_vector_indexes WHERE scope = ANY(after) LOOP
        EXECUTE format('INSERT INTO %I (scope, id, embedding) VALUES ($1, $2, $3) ON CONFLICT (scope, id) '
                       'DO UPDATE SET embedding = EXCLUDED.embedding', graph.index_name)
            USING graph.scope, NEW.id, NEW.embedding::halfvec(384);
    END LOOP;
    RETURN NULL;
END
$$
;;
CREATE FUNCTION memory_owner_vectors_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE memory_owner_vectors;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    conn = op.get_bind()
    op.execute(f"CREATE TABLE {vi.TABLE} (scope text NOT NULL, id text NOT NULL, "
               f"embedding {vi.COPY_TYPE} NOT NULL, PRIMARY KEY (scope, id)) PARTITION BY LIST (scope)")
    for function in _FUNCTIONS.split(";;"):
        op.execute(function)
    op.execute("CREATE TRIGGER memory_owner_vectors_sync AFTER INSERT OR DELETE OR UPDATE OF agent_id, tags, shared, "
               "status, embedding ON memory_records FOR EACH ROW EXECUTE FUNCTION memory_owner_vectors_sync()")
    op.execute("CREATE TRIGGER memory_owner_vectors_truncate AFTER TRUNCATE ON memory_records "
               "FOR EACH STATEMENT EXECUTE FUNCTION memory_owner_vectors_truncate()")
    _roomy_builds(conn)
    for scope in sorted(vi.recorded(conn)):
        conn.exec_driver_sql(vi.drop_sql(scope))
        vi.forget(conn, scope)
        vi.build_here(conn, scope)


def downgrade() -> None:
    conn = op.get_bind()
    scopes = sorted(vi.recorded(conn))
    for scope in scopes:
        vi.drop(conn, scope)
    op.execute("DROP TRIGGER memory_owner_vectors_truncate ON memory_records")
    op.execute("DROP TRIGGER memory_owner_vectors_sync ON memory_records")
    op.execute("DROP FUNCTION memory_owner_vectors_truncate(), memory_owner_vectors_sync(), "
               "memory_owner_scopes(text, text[], boolean, text)")
    op.execute(f"DROP TABLE {vi.TABLE}")
    _roomy_builds(conn)
    for scope in scopes:
        conn.exec_driver_sql(vi.create_sql(scope))
        vi.record(conn, scope)


def _roomy_builds(conn) -> None:
    """Room for an agent's graph in ``maintenance_work_mem`` (PostgreSQL's 64 MB default builds
    a 20,000-vector graph on disk, several times slower), for this transaction only."""
    conn.exec_driver_sql("SELECT set_config('maintenance_work_mem', greatest((SELECT setting::bigint FROM pg_settings "
                         "WHERE name = 'maintenance_work_mem'), 262144)::text || 'kB', true)")
