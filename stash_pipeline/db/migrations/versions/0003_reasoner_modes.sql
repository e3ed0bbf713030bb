-- The structured-output mode (json_schema, json_object or none) that a model endpoint
-- accepts, negotiated once in STASH_REASONER_STRUCTURED=auto and shared by every process
-- and run, so a server that refuses json_schema is not asked again on every start.
CREATE TABLE reasoner_modes (
    endpoint     text NOT NULL,
    model        text NOT NULL,
    mode         text NOT NULL CHECK (mode IN ('json_schema', 'json_object', 'none')),
    -- why the previous mode was given up (the server's refusal), when it was
    reason       text,
    -- last time an answer came back in this mode (NULL: chosen, not yet answered)
    verified_at  timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, model)
);
