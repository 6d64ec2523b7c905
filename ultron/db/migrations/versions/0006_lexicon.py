"""BM25 statistics for the lexical search arm: document frequency per lexeme and corpus length.

``ts_rank`` has no inverse document frequency and no length normalisation, so a common word
weighs as much as a rare one. BM25 needs, for each query lexeme, how many active memories
hold it, and the average document length; both are kept here, on write, by a trigger on
``memory_records`` (insert, delete, a new body, archive or restore), so every write path
keeps them right and a search reads a handful of rows.

Counts are split over ``SHARDS`` rows per lexeme. A writing transaction first takes a free
shard slot (a transaction-level advisory lock) and only ever touches that shard's rows, so
concurrent writers never wait on, or deadlock over, the row of a common word; a search sums
the shards. Corpus lengths are kept per field (len_a content, len_b resolution, len_c context) so the
field weights can change at query time without a rebuild; each memory's own field lengths are
columns (``len_content``, ``len_context``, ``len_resolution``) kept by a BEFORE trigger, so a
search never re-tokenises a document to normalise its length.

``ultron_lexicon_rebuild()`` recomputes everything from the table in one pass (used here and
by bulk loaders that disable the trigger).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

SHARDS = 32
SLOT_LOCK_KEY = 0x756C7478  # advisory lock class of the shard slots ("ultx")


def upgrade() -> None:
    # Token count of a tsvector (positions, not distinct lexemes): a field's BM25 length.
    op.execute("""
        CREATE FUNCTION ultron_tsv_tokens(doc tsvector) RETURNS integer
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        RETURN (SELECT coalesce(sum(coalesce(array_length(u.positions, 1), 1)), 0)::integer FROM unnest(doc) u)""")
    # Each field's length, kept by a BEFORE trigger on the text columns only (not generated
    # columns: those are recomputed on every UPDATE, hit counting included).
    for column in ("len_content", "len_context", "len_resolution"):
        op.execute(f"ALTER TABLE memory_records ADD COLUMN {column} integer NOT NULL DEFAULT 0")
    op.execute("""
        CREATE FUNCTION ultron_lexicon_lengths() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.len_content := ultron_tsv_tokens(to_tsvector('english', coalesce(NEW.content, '')));
            NEW.len_context := ultron_tsv_tokens(to_tsvector('english', coalesce(NEW.context, '')));
            NEW.len_resolution := ultron_tsv_tokens(to_tsvector('english', coalesce(NEW.resolution, '')));
            RETURN NEW;
        END $$""")
    op.execute("""
        CREATE TRIGGER memory_records_lengths
        BEFORE INSERT OR UPDATE OF content, context, resolution ON memory_records
        FOR EACH ROW EXECUTE FUNCTION ultron_lexicon_lengths()""")
    op.execute("""
        UPDATE memory_records SET
            len_content = ultron_tsv_tokens(to_tsvector('english', coalesce(content, ''))),
            len_context = ultron_tsv_tokens(to_tsvector('english', coalesce(context, ''))),
            len_resolution = ultron_tsv_tokens(to_tsvector('english', coalesce(resolution, '')))""")
    op.execute("""
        CREATE TABLE memory_lexemes (
            lexeme text NOT NULL,
            shard smallint NOT NULL,
            df bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (lexeme, shard)
        )""")
    op.execute("""
        CREATE TABLE memory_corpus (
            shard smallint PRIMARY KEY,
            docs bigint NOT NULL DEFAULT 0,
            len_a double precision NOT NULL DEFAULT 0,
            len_b double precision NOT NULL DEFAULT 0,
            len_c double precision NOT NULL DEFAULT 0
        )""")
    # Which shard this transaction writes: the first slot it can lock (its own, if it holds
    # one already: advisory xact locks are re-entrant). Waits only when every slot is busy.
    op.execute(f"""
        CREATE FUNCTION ultron_lexicon_shard() RETURNS smallint LANGUAGE plpgsql AS $$
        DECLARE
            start int := pg_backend_pid() % {SHARDS};
            s int;
        BEGIN
            FOR i IN 0..{SHARDS - 1} LOOP
                s := (start + i) % {SHARDS};
                IF pg_try_advisory_xact_lock({SLOT_LOCK_KEY}, s) THEN
                    RETURN s;
                END IF;
            END LOOP;
            PERFORM pg_advisory_xact_lock({SLOT_LOCK_KEY}, start);
            RETURN start;
        END $$""")
    op.execute("""
        CREATE FUNCTION ultron_lexicon_add(doc tsvector, a integer, b integer, c integer, sign integer)
        RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            s smallint := ultron_lexicon_shard();
        BEGIN
            INSERT INTO memory_lexemes AS l (lexeme, shard, df)
            SELECT u.lexeme, s, sign FROM unnest(doc) u ORDER BY u.lexeme
            ON CONFLICT (lexeme, shard) DO UPDATE SET df = l.df + EXCLUDED.df;
            IF sign < 0 THEN
                -- a word no active memory holds any more leaves no trace (forget means forget)
                DELETE FROM memory_lexemes d USING (
                    SELECT z.lexeme FROM memory_lexemes z
                    WHERE z.lexeme IN (SELECT u.lexeme FROM unnest(doc) u)
                    GROUP BY z.lexeme HAVING sum(z.df) <= 0) gone
                WHERE d.lexeme = gone.lexeme;
            END IF;
            INSERT INTO memory_corpus AS m (shard, docs, len_a, len_b, len_c)
            VALUES (s, sign, sign * a, sign * b, sign * c)
            ON CONFLICT (shard) DO UPDATE SET docs = m.docs + EXCLUDED.docs, len_a = m.len_a + EXCLUDED.len_a,
                len_b = m.len_b + EXCLUDED.len_b, len_c = m.len_c + EXCLUDED.len_c;
        END $$""")
    op.execute("""
        CREATE FUNCTION ultron_lexicon_track() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
                    AND OLD.search_tsv IS NOT DISTINCT FROM NEW.search_tsv THEN
                RETURN NULL;
            END IF;
            IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'active' THEN
                PERFORM ultron_lexicon_add(OLD.search_tsv, OLD.len_content, OLD.len_resolution, OLD.len_context, -1);
            END IF;
            IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.status = 'active' THEN
                PERFORM ultron_lexicon_add(NEW.search_tsv, NEW.len_content, NEW.len_resolution, NEW.len_context, 1);
            END IF;
            RETURN NULL;
        END $$""")
    # Column-specific: hit counting (hit_count, last_hit_at) never fires it, so those updates stay HOT.
    op.execute("""
        CREATE TRIGGER memory_records_lexicon
        AFTER INSERT OR DELETE OR UPDATE OF content, context, resolution, status ON memory_records
        FOR EACH ROW EXECUTE FUNCTION ultron_lexicon_track()""")
    op.execute("""
        CREATE FUNCTION ultron_lexicon_rebuild() RETURNS void LANGUAGE sql AS $$
            DELETE FROM memory_lexemes;
            DELETE FROM memory_corpus;
            INSERT INTO memory_lexemes (lexeme, shard, df)
            SELECT u.lexeme, 0, count(*) FROM memory_records m, unnest(m.search_tsv) u
            WHERE m.status = 'active' GROUP BY u.lexeme;
            INSERT INTO memory_corpus (shard, docs, len_a, len_b, len_c)
            SELECT 0, count(*), coalesce(sum(len_content), 0), coalesce(sum(len_resolution), 0),
                   coalesce(sum(len_context), 0)
            FROM memory_records WHERE status = 'active';
        $$""")
    op.execute("SELECT ultron_lexicon_rebuild()")
    # GIN "fast update" defers index entries to a pending list that every search then scans
    # linearly: after a few thousand uploads that list cost more than the rest of a search.
    # Memories are written far less often than searched, so entries go straight into the index.
    for index in ("ix_memory_records_search_tsv", "ix_memory_records_tags"):
        op.execute(f"ALTER INDEX {index} SET (fastupdate = off)")
        op.execute(f"SELECT gin_clean_pending_list('{index}'::regclass)")


def downgrade() -> None:
    for index in ("ix_memory_records_search_tsv", "ix_memory_records_tags"):
        op.execute(f"ALTER INDEX {index} RESET (fastupdate)")
    op.execute("DROP TRIGGER IF EXISTS memory_records_lexicon ON memory_records")
    op.execute("DROP TRIGGER IF EXISTS memory_records_lengths ON memory_records")
    for fn in ("ultron_lexicon_track()", "ultron_lexicon_lengths()", "ultron_lexicon_add(tsvector, integer, integer, integer, integer)",
               "ultron_lexicon_shard()", "ultron_lexicon_rebuild()"):
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    op.execute("DROP TABLE IF EXISTS memory_corpus")
    op.execute("DROP TABLE IF EXISTS memory_lexemes")
    for column in ("len_content", "len_context", "len_resolution"):
        op.execute(f"ALTER TABLE memory_records DROP COLUMN IF EXISTS {column}")
    op.execute("DROP FUNCTION IF EXISTS ultron_tsv_tokens(tsvector)")
