-- Recall's keyword leg in every language: one function, stash_lexemes(text), makes the
-- lexemes of a stored text (the generated search columns below) and of a query or an alias
-- (recall.sql), so both sides always tokenise alike.
--
-- to_tsvector('english', ...) alone failed three ways outside English:
-- * Chinese, Japanese, Thai (and Korean, Lao, Khmer, Myanmar) put no space between words:
--   a whole run of them became one lexeme, matched only by the same run verbatim. Such
--   runs are indexed as overlapping pairs of characters instead (a single character alone:
--   itself), the way CJK bigram search engines do: "北京开会" gives 北京 京开 开会, and a
--   question holding 北京 or 开会 matches it.
-- * Under the C locale (the embedded server's), the default parser counts every character
--   outside ASCII as a letter: punctuation such as ，。、「」¿¡«»“”…—؟،। stayed glued to
--   the word beside it ("الاجتماع؟", "¿dónde"), and capitals outside ASCII were not
--   lowercased ("Über" was not "über"). Those marks are read as spaces, and the text is
--   lowercased with Unicode case mapping (pg_c_utf8, PostgreSQL 17+; on 15 and 16 the
--   database's own lowercasing, which a libc or ICU locale does in the parser) after NFKC
--   normalisation (full-width Ｆｏｏ１２ is Foo12, composed and decomposed accents agree).
-- * Arabic attaches its article and prepositions to the word (الشعار, للمالك) and Hindi
--   inflects it: the words in Arabic script are stemmed by the arabic configuration, those
--   in Devanagari by the hindi one (chosen by script, so no language is guessed; the
--   english stemmer left them as they were).
-- Everything else, and English stemming and stop words above all, is to_tsvector('english')
-- as before; a text wholly in ASCII takes exactly that path, so its lexemes do not change.
-- The pairs are made from the first 20,000 characters of a text (at most 20,000 pairs;
-- the default STASH_MAX_CONTENT_BYTES admits 3,333 such characters), so no text too long
-- for a tsvector is ever built from them.
--
-- PL/pgSQL, not SQL: a SQL function that cannot be inlined pays an executor start per call
-- (measured: 2.2x to_tsvector's time on an English text, 10x on a German one); here an
-- ASCII text costs what to_tsvector does. Every name it uses is a built-in one (pg_catalog
-- is searched first), the configurations spelt with their schema. On a database whose
-- encoding is not UTF8 (which cannot store these scripts) it is to_tsvector('english').
DO $migration$
DECLARE
    -- letters of the scripts written without spaces between words: 々〆〇, hiragana,
    -- katakana (not its middle dot), kanji/hanzi (unified, extension A, compatibility and
    -- the supplementary planes), hangul, Thai, Lao, Myanmar, Khmer
    runs constant text := '\u3005-\u3007\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff\u31f0-\u31ff'
        || '\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f'
        || '\u1100-\u11ff\u3131-\u318e\uac00-\ud7a3'
        || '\u0e01-\u0e2e\u0e30-\u0e45\u0e47-\u0e4e\u0e50-\u0e59\u0e81-\u0edf\u1000-\u109f\u1780-\u17d3\u17e0-\u17e9';
    -- Arabic script (letters, marks, digits; not its punctuation), Devanagari (not its dandas)
    arabic constant text := '\u0610-\u061a\u0620-\u0669\u066e-\u06d3\u06d5-\u06ff\u0750-\u077f\u08a0-\u08ff';
    devanagari constant text := '\u0900-\u0963\u0966-\u097f';
    -- punctuation outside ASCII: Latin-1's ¡«»¿, the general punctuation block (dashes,
    -- curly quotes, ellipsis, spaces of every width, zero-width space), CJK punctuation,
    -- full-width ASCII punctuation, the katakana middle dot, Arabic comma, semicolon,
    -- question mark, full stop, Devanagari danda, Thai ฯ ๆ ๏ ๚ ๛
    marks constant text := '\u00a1\u00ab\u00bb\u00bf\u2000-\u200b\u2010-\u205e\u3000-\u3004\u3008-\u303f\u30fb'
        || '\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65\u060c\u061b\u061f\u066a-\u066d\u06d4'
        || '\u0964\u0965\u0e2f\u0e46\u0e4f\u0e5a\u0e5b';
    folded text := 'normalize(doc, NFKC)';
    arabic_config text := 'pg_catalog.english';
    hindi_config text := 'pg_catalog.english';
BEGIN
    IF current_setting('server_encoding') <> 'UTF8' THEN
        CREATE FUNCTION stash_lexemes(doc text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        RETURN to_tsvector('english'::regconfig, doc);
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM pg_collation WHERE collname = 'pg_c_utf8') THEN
        folded := 'lower(normalize(doc, NFKC) COLLATE pg_c_utf8)';
    END IF;
    IF EXISTS (SELECT FROM pg_ts_config WHERE cfgname = 'arabic') THEN
        arabic_config := 'pg_catalog.arabic';
    END IF;
    IF EXISTS (SELECT FROM pg_ts_config WHERE cfgname = 'hindi') THEN
        hindi_config := 'pg_catalog.hindi';
    END IF;
    EXECUTE format($function$
        CREATE FUNCTION stash_lexemes(doc text) RETURNS tsvector
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $body$
        DECLARE
            s text;
            lexemes tsvector;
            run text;
            chars text[];
            pairs text[] := '{}';
            place integer := 0;
        BEGIN
            IF doc !~ '[^\x01-\x7f]' THEN
                RETURN to_tsvector('pg_catalog.english', doc);
            END IF;
            s := %1$s;
            lexemes := to_tsvector('pg_catalog.english', regexp_replace(s, %2$L, ' ', 'g'));
            IF s ~ %3$L THEN
                lexemes := lexemes || to_tsvector(%4$L, regexp_replace(s, %5$L, ' ', 'g'));
            END IF;
            IF s ~ %6$L THEN
                lexemes := lexemes || to_tsvector(%7$L, regexp_replace(s, %8$L, ' ', 'g'));
            END IF;
            IF s ~ %9$L THEN
                -- each run's pairs in order, positions after the words'; a run of one
                -- character gives that character
                FOR run IN SELECT m[1] FROM regexp_matches(left(s, 20000), %10$L, 'g') AS m LOOP
                    chars := string_to_array(run, NULL);
                    FOR i IN 1 .. greatest(cardinality(chars) - 1, 1) LOOP
                        place := place + 1;
                        pairs := pairs || ('''' || chars[i] || COALESCE(chars[i + 1], '') || ''':' || place);
                    END LOOP;
                END LOOP;
                lexemes := lexemes || array_to_string(pairs, ' ')::tsvector;
            END IF;
            RETURN lexemes;
        END
        $body$
        $function$,
        folded,
        '[' || marks || runs || arabic || devanagari || ']+',
        '[' || arabic || ']', arabic_config, '[^' || arabic || ']+',
        '[' || devanagari || ']', hindi_config, '[^' || devanagari || ']+',
        '[' || runs || ']', '[' || runs || ']+');
END
$migration$;

COMMENT ON FUNCTION stash_lexemes(text) IS
    'The lexemes of a text for recall''s keyword leg: english full text, Arabic and Devanagari words stemmed by script, runs of scripts without spaces as character pairs (migration 0022)';

-- The search columns recomputed with it (each table rewritten once) and their word indexes
-- built again; the generated expression cannot be altered in place before PostgreSQL 17.
ALTER TABLE episodes DROP COLUMN search;
ALTER TABLE episodes ADD COLUMN search tsvector GENERATED ALWAYS AS (stash_lexemes(content)) STORED;
CREATE INDEX episodes_search_gin ON episodes USING gin (search);
ALTER TABLE facts DROP COLUMN search;
ALTER TABLE facts ADD COLUMN search tsvector GENERATED ALWAYS AS (stash_lexemes(content)) STORED;
CREATE INDEX facts_search_gin ON facts USING gin (search);

-- The BM25 statistics (0005) again from the rows as they now read: a table rewrite fires
-- no trigger. Both tables are locked by the ALTERs above until this transaction ends, so
-- no writer changes them meanwhile. Lexemes no live row holds are not kept (erasure's rule).
DELETE FROM recall_text_stats;
DELETE FROM recall_term_stats;
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
