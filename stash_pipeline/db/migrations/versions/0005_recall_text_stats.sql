-- Term statistics for BM25 ranking of recall's full-text side.
--
-- ts_rank_cd has no inverse document frequency: in a chat history the speaker's name and
-- everyday words outvote the one rare word that matters. BM25 needs, per namespace, how
-- many live documents contain each lexeme and the documents' count and total length (in
-- distinct lexemes, stop words excluded). Episodes and facts form one corpus per
-- namespace, because recall ranks them together. "Live" = what recall can return by
-- default: episodes not forgotten, facts not withdrawn.
--
-- Statement-level triggers with transition tables keep both tables current on insert
-- (remember, remember_batch, import, COPY), delete (purge, namespace deletion) and on the
-- updates that change liveness (forget, withdraw, and their reversal). Each namespace's
-- statistics are changed under the same per-namespace transaction lock that orders ids
-- (assign_ordered_id), taken in namespace order, so concurrent writers cannot deadlock
-- on the statistics rows.

CREATE TABLE recall_term_stats (
    namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    lexeme       text NOT NULL,
    documents    bigint NOT NULL CHECK (documents >= 0),  -- 0: seen once, none live now
    PRIMARY KEY (namespace_id, lexeme)
);
-- recall over every namespace sums a lexeme's counts across namespaces
CREATE INDEX recall_term_stats_lexeme_idx ON recall_term_stats (lexeme);

CREATE TABLE recall_text_stats (
    namespace_id bigint PRIMARY KEY REFERENCES namespaces(id) ON DELETE CASCADE,
    documents    bigint NOT NULL CHECK (documents >= 0),
    total_length bigint NOT NULL CHECK (total_length >= 0)
);

-- A document's BM25 length: its number of distinct lexemes (length(tsvector), cheap; in
-- short texts it is nearly the word count). The statistics sum it; recall's query uses
-- length(search) directly, the same number.
CREATE FUNCTION recall_text_length(doc tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT length(doc) $$;

-- One signed document change: +1 for a document entering the live corpus, -1 for one leaving.
CREATE TYPE recall_stats_delta AS (namespace_id bigint, search tsvector, sign integer);

CREATE FUNCTION recall_stats_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    deltas recall_stats_delta[];
    ns bigint;
BEGIN
    -- live = what recall returns by default: episodes not forgotten, facts not withdrawn
    -- (plpgsql compiles a trigger function once per table, so each branch only ever
    -- names columns of the table it runs for)
    IF TG_OP = 'INSERT' AND TG_TABLE_NAME = 'episodes' THEN
        SELECT array_agg(ROW(n.namespace_id, n.search, 1)::recall_stats_delta) INTO deltas
        FROM new_rows n WHERE n.deleted_at IS NULL;
    ELSIF TG_OP = 'INSERT' THEN
        SELECT array_agg(ROW(n.namespace_id, n.search, 1)::recall_stats_delta) INTO deltas
        FROM new_rows n WHERE n.withdrawn_at IS NULL;
    ELSIF TG_OP = 'DELETE' AND TG_TABLE_NAME = 'episodes' THEN
        SELECT array_agg(ROW(o.namespace_id, o.search, -1)::recall_stats_delta) INTO deltas
        FROM old_rows o WHERE o.deleted_at IS NULL;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(ROW(o.namespace_id, o.search, -1)::recall_stats_delta) INTO deltas
        FROM old_rows o WHERE o.withdrawn_at IS NULL;
    ELSIF TG_TABLE_NAME = 'episodes' THEN
        -- only rows whose liveness changed (content and namespace are never updated)
        SELECT array_agg(ROW(n.namespace_id, n.search,
                             CASE WHEN n.deleted_at IS NULL THEN 1 ELSE -1 END)::recall_stats_delta) INTO deltas
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (o.deleted_at IS NULL) <> (n.deleted_at IS NULL);
    ELSE
        SELECT array_agg(ROW(n.namespace_id, n.search,
                             CASE WHEN n.withdrawn_at IS NULL THEN 1 ELSE -1 END)::recall_stats_delta) INTO deltas
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (o.withdrawn_at IS NULL) <> (n.withdrawn_at IS NULL);
    END IF;
    IF deltas IS NULL THEN
        RETURN NULL;
    END IF;

    FOR ns IN SELECT DISTINCT d.namespace_id FROM unnest(deltas) AS d ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(7311, (ns % 2147483647)::int);
    END LOOP;

    -- Growth is upserted; shrinkage only updates existing rows: a namespace being
    -- deleted may already have lost its statistics rows (ON DELETE CASCADE), and nothing
    -- must be re-created for it.
    INSERT INTO recall_text_stats AS s (namespace_id, documents, total_length)
    SELECT d.namespace_id, sum(d.sign), sum(d.sign * recall_text_length(d.search))
    FROM unnest(deltas) AS d
    GROUP BY d.namespace_id
    HAVING sum(d.sign) > 0
    ORDER BY d.namespace_id
    ON CONFLICT (namespace_id) DO UPDATE
        SET documents = s.documents + EXCLUDED.documents,
            total_length = s.total_length + EXCLUDED.total_length;
    UPDATE recall_text_stats s
    SET documents = s.documents + g.documents, total_length = s.total_length + g.total_length
    FROM (SELECT d.namespace_id, sum(d.sign) AS documents, sum(d.sign * recall_text_length(d.search)) AS total_length
          FROM unnest(deltas) AS d GROUP BY d.namespace_id HAVING sum(d.sign) <= 0) g
    WHERE s.namespace_id = g.namespace_id;

    INSERT INTO recall_term_stats AS s (namespace_id, lexeme, documents)
    SELECT d.namespace_id, u.lexeme, sum(d.sign)
    FROM unnest(deltas) AS d CROSS JOIN LATERAL unnest(d.search) AS u
    GROUP BY d.namespace_id, u.lexeme
    HAVING sum(d.sign) > 0
    ORDER BY d.namespace_id, u.lexeme
    ON CONFLICT (namespace_id, lexeme) DO UPDATE SET documents = s.documents + EXCLUDED.documents;
    UPDATE recall_term_stats s
    SET documents = s.documents + g.documents
    FROM (SELECT d.namespace_id, u.lexeme, sum(d.sign) AS documents
          FROM unnest(deltas) AS d CROSS JOIN LATERAL unnest(d.search) AS u
          GROUP BY d.namespace_id, u.lexeme HAVING sum(d.sign) < 0) g
    WHERE s.namespace_id = g.namespace_id AND s.lexeme = g.lexeme;
    RETURN NULL;
END $$;

CREATE TRIGGER episodes_recall_stats_insert AFTER INSERT ON episodes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_stats_change();
CREATE TRIGGER episodes_recall_stats_update AFTER UPDATE ON episodes
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_stats_change();
CREATE TRIGGER episodes_recall_stats_delete AFTER DELETE ON episodes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_stats_change();
CREATE TRIGGER facts_recall_stats_insert AFTER INSERT ON facts
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_stats_change();
CREATE TRIGGER facts_recall_stats_update AFTER UPDATE ON facts
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_stats_change();
CREATE TRIGGER facts_recall_stats_delete AFTER DELETE ON facts
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION recall_stats_change();

-- Statistics of what is already stored.
INSERT INTO recall_text_stats (namespace_id, documents, total_length)
SELECT namespace_id, count(*), sum(recall_text_length(search))
FROM (SELECT namespace_id, search FROM episodes WHERE deleted_at IS NULL
      UNION ALL SELECT namespace_id, search FROM facts WHERE withdrawn_at IS NULL) live
GROUP BY namespace_id;
INSERT INTO recall_term_stats (namespace_id, lexeme, documents)
SELECT live.namespace_id, u.lexeme, count(*)
FROM (SELECT namespace_id, search FROM episodes WHERE deleted_at IS NULL
      UNION ALL SELECT namespace_id, search FROM facts WHERE withdrawn_at IS NULL) live
CROSS JOIN LATERAL unnest(live.search) AS u
GROUP BY live.namespace_id, u.lexeme;
