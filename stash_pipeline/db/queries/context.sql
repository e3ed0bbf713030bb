-- context_upsert --
-- Set the one focus of a namespace, with its expiry.
INSERT INTO contexts (namespace_id, focus, expires_at)
VALUES (%(namespace_id)s, %(focus)s, now() + %(ttl)s::interval)
ON CONFLICT (namespace_id) DO UPDATE
   SET focus = EXCLUDED.focus, expires_at = EXCLUDED.expires_at, updated_at = now()
RETURNING focus, expires_at, created_at, updated_at

-- context_delete_expired --
-- Drop the namespace's focus if it has expired (TTL enforced on read).
DELETE FROM contexts WHERE namespace_id = %(namespace_id)s AND expires_at <= now()

-- context_get --
-- The namespace's focus, if any.
SELECT focus, expires_at, created_at, updated_at FROM contexts WHERE namespace_id = %(namespace_id)s

-- context_clear --
-- Remove the namespace's focus.
DELETE FROM contexts WHERE namespace_id = %(namespace_id)s
