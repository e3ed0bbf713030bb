-- auth_insert_token --
-- Store a new API token (only the sha256 of the secret is kept).
INSERT INTO api_tokens (name, token_hash, prefix, namespaces, rights)
VALUES (%(name)s, %(token_hash)s, %(prefix)s, %(namespaces)s, %(rights)s)
RETURNING id, name, prefix, namespaces, rights, created_at, last_used_at, revoked_at

-- auth_list_tokens --
-- Every token, newest first; never the hash.
SELECT id, name, prefix, namespaces, rights, created_at, last_used_at, revoked_at
FROM api_tokens
ORDER BY id DESC

-- auth_revoke_token --
-- Revoke an active token; a token already revoked keeps its first revocation time.
UPDATE api_tokens SET revoked_at = now()
WHERE id = %(id)s AND revoked_at IS NULL
RETURNING id

-- auth_find_token --
-- An active token by the hash of its secret.
SELECT id, name, prefix, namespaces, rights, last_used_at
FROM api_tokens
WHERE token_hash = %(token_hash)s AND revoked_at IS NULL

-- auth_touch_token --
-- Record use, at most once a minute per token, so authentication stays one cheap read.
UPDATE api_tokens SET last_used_at = now()
WHERE id = %(id)s AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')

-- auth_check_token --
-- An active token by the hash of its secret, its use recorded (at most once a minute) in
-- the same statement: one round trip in autocommit, for the check before every HTTP request.
WITH found AS (
  SELECT id, name, namespaces, rights, last_used_at
  FROM api_tokens
  WHERE token_hash = %(token_hash)s AND revoked_at IS NULL
), touched AS (
  UPDATE api_tokens AS t SET last_used_at = now()
  FROM found
  WHERE t.id = found.id AND (found.last_used_at IS NULL OR found.last_used_at < now() - interval '60 seconds')
)
SELECT id, name, namespaces, rights FROM found

-- auth_open_session --
-- A console session for a token, for ttl_s seconds; sessions past their end are cleared
-- in the same statement (their rows are the only trace of a sign-in).
WITH cleared AS (
  DELETE FROM console_sessions WHERE expires_at < now()
)
INSERT INTO console_sessions (secret_hash, token_id, expires_at)
VALUES (%(secret_hash)s, %(token_id)s, now() + %(ttl_s)s * interval '1 second')

-- auth_check_session --
-- The active token of a live console session (none once the session ended or the token
-- was revoked), its use recorded as a bearer check records it (at most once a minute).
WITH found AS (
  SELECT t.id, t.name, t.namespaces, t.rights, t.last_used_at
  FROM console_sessions s JOIN api_tokens t ON t.id = s.token_id
  WHERE s.secret_hash = %(secret_hash)s AND s.expires_at > now() AND t.revoked_at IS NULL
), touched AS (
  UPDATE api_tokens AS t SET last_used_at = now()
  FROM found
  WHERE t.id = found.id AND (found.last_used_at IS NULL OR found.last_used_at < now() - interval '60 seconds')
)
SELECT id, name, namespaces, rights FROM found

-- auth_close_session --
-- Sign-out: the session ends at once.
DELETE FROM console_sessions WHERE secret_hash = %(secret_hash)s
