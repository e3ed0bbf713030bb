-- The schema of a Go Stash database (the system Stash re-creates), as its migrations leave
-- it at their latest version, with vectors at 384 dimensions. Used by the migrate-from-go
-- tests to build a source database; the comments note what older Go versions lack.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE namespaces (
    id bigserial PRIMARY KEY, slug text NOT NULL UNIQUE, name text NOT NULL DEFAULT '',
    description text NOT NULL DEFAULT '', created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    persona text NOT NULL DEFAULT ''                                   -- later versions only
);
CREATE TABLE episodes (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    content text NOT NULL, embedding vector(384), embedding_model text,
    occurred_at timestamptz NOT NULL DEFAULT now(), created_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz
);
CREATE TABLE facts (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    content text NOT NULL, embedding vector(384), embedding_model text,
    confidence real NOT NULL DEFAULT 1.0 CHECK (confidence >= 0 AND confidence <= 1),
    valid_from timestamptz, valid_until timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz,
    entity text, property text, value text,
    metadata jsonb                                                      -- later versions only
);
CREATE TABLE fact_sources (
    fact_id bigint REFERENCES facts(id) ON DELETE CASCADE,
    episode_id bigint REFERENCES episodes(id) ON DELETE CASCADE,
    PRIMARY KEY (fact_id, episode_id)
);
CREATE TABLE relationships (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    from_entity text NOT NULL, relation_type text NOT NULL, to_entity text NOT NULL,
    confidence real NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    source_fact_id bigint REFERENCES facts(id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz
);
CREATE TABLE patterns (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    content text NOT NULL, confidence real NOT NULL DEFAULT 0.5 CHECK (confidence >= 0 AND confidence <= 1),
    source_fact_ids bigint[] NOT NULL DEFAULT '{}', source_rel_ids bigint[] NOT NULL DEFAULT '{}',
    coherence_score real NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz
);
CREATE TABLE contexts (
    namespace_id bigint PRIMARY KEY REFERENCES namespaces(id) ON DELETE CASCADE,
    focus text NOT NULL DEFAULT '', expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE consolidation_progress (
    namespace_id bigint PRIMARY KEY REFERENCES namespaces(id) ON DELETE CASCADE,
    last_episode_id bigint NOT NULL DEFAULT 0, last_fact_id bigint NOT NULL DEFAULT 0,
    last_relationship_id bigint NOT NULL DEFAULT 0, last_pattern_fact_id bigint NOT NULL DEFAULT 0,
    last_pattern_rel_id bigint NOT NULL DEFAULT 0, last_run timestamptz, updated_at timestamptz NOT NULL DEFAULT now(),
    last_decay_run timestamptz, last_goal_progress_fact_id bigint NOT NULL DEFAULT 0,
    last_failure_id bigint NOT NULL DEFAULT 0, last_failure_episode_id bigint NOT NULL DEFAULT 0,
    last_hypothesis_fact_id bigint NOT NULL DEFAULT 0
);
CREATE TABLE settings (key text PRIMARY KEY, value text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE embedding_cache (
    text_hash text, model text, text text NOT NULL, embedding vector(384) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (text_hash, model)
);
CREATE TABLE contradictions (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    old_fact_id bigint NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    new_fact_id bigint NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    entity text NOT NULL, property text NOT NULL, old_value text NOT NULL, new_value text NOT NULL,
    confidence real NOT NULL DEFAULT 0.5, method text NOT NULL DEFAULT 'structured',
    resolved boolean NOT NULL DEFAULT false, resolution text, resolved_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE goals (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    parent_id bigint REFERENCES goals(id) ON DELETE CASCADE, content text NOT NULL,
    status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed', 'abandoned')),
    priority int NOT NULL DEFAULT 0, notes text NOT NULL DEFAULT '', completed_at timestamptz,
    abandoned_at timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz
);
CREATE TABLE failures (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    goal_id bigint REFERENCES goals(id) ON DELETE SET NULL, content text NOT NULL,
    reason text NOT NULL DEFAULT '', lesson text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz
);
CREATE TABLE causal_links (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    cause_fact_id bigint NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    effect_fact_id bigint REFERENCES facts(id) ON DELETE CASCADE,              -- NOT NULL in older versions
    effect_failure_id bigint REFERENCES failures(id) ON DELETE CASCADE,        -- later versions only
    confidence real NOT NULL DEFAULT 0.5, method text NOT NULL DEFAULT 'extracted',
    created_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz,
    CONSTRAINT causal_links_effect_check CHECK ((effect_fact_id IS NULL) <> (effect_failure_id IS NULL))
);
CREATE TABLE hypotheses (
    id bigserial PRIMARY KEY, namespace_id bigint NOT NULL REFERENCES namespaces(id) ON DELETE CASCADE,
    content text NOT NULL, confidence real NOT NULL DEFAULT 0.5,
    status text NOT NULL DEFAULT 'proposed' CHECK (status IN ('proposed', 'testing', 'confirmed', 'rejected')),
    verification_plan text NOT NULL DEFAULT '', method text NOT NULL DEFAULT 'asserted',
    confirmed_fact_id bigint REFERENCES facts(id), rejection_reason text,
    source_fact_ids bigint[] NOT NULL DEFAULT '{}', tested_at timestamptz, confirmed_at timestamptz,
    rejected_at timestamptz, created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(), deleted_at timestamptz
);
