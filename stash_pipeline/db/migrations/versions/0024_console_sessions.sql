-- Console sign-ins. The console's cookie holds a random session secret, never the token
-- it was opened with: a cookie reaches every port of its host, and a token outlives any
-- session. A session names its token and ends at expires_at, at sign-out (its row is
-- deleted), or when the token is revoked or deleted (every check joins the token).
CREATE TABLE console_sessions (
    secret_hash text PRIMARY KEY,
    token_id    bigint NOT NULL REFERENCES api_tokens(id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires_idx ON console_sessions (expires_at);
