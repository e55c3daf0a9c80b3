-- API tokens: bearer secrets for the JSON API, kept as their SHA-256 only.

-- name: token_insert
-- A new token; it expires `lifetime_seconds` from now (never when that is null).
INSERT INTO api_tokens (user_id, name, token_hash, prefix, scope, created_by, expires_at)
VALUES (%(user_id)s, %(name)s, %(token_hash)s, %(prefix)s, %(scope)s, %(created_by)s,
        coalesce(%(now)s::timestamptz, now())
            + make_interval(secs => %(lifetime_seconds)s::float8))
RETURNING id, name, prefix, scope, created_at, expires_at;

-- name: token_by_hash
-- (read) the token and its user, for every API request; the caller checks expiry,
-- revocation and whether the user is disabled.
SELECT t.id, t.scope, t.expires_at, t.revoked_at, t.last_used_at,
       coalesce(%(now)s::timestamptz, now()) AS now,
       u.id AS user_id, u.username, u.role, u.disabled
FROM api_tokens t JOIN users u ON u.id = t.user_id
WHERE t.token_hash = %(token_hash)s;

-- name: token_touch
-- Last-used time, written at most once a minute per token (not on every request).
UPDATE api_tokens SET last_used_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s
  AND (last_used_at IS NULL
       OR last_used_at < coalesce(%(now)s::timestamptz, now()) - interval '1 minute');

-- name: token_list
-- (read) every token, newest first, with its user's name.
SELECT t.id, t.name, t.prefix, t.scope, t.created_by, t.created_at, t.expires_at,
       t.last_used_at, t.revoked_at, u.username,
       (t.revoked_at IS NULL
        AND (t.expires_at IS NULL OR t.expires_at > coalesce(%(now)s::timestamptz, now())))
           AS active
FROM api_tokens t JOIN users u ON u.id = t.user_id
ORDER BY t.id DESC;

-- name: token_row
-- (read) one token as the list shows it.
SELECT t.id, t.name, t.prefix, t.scope, t.created_by, t.created_at, t.expires_at,
       t.last_used_at, t.revoked_at, u.username,
       (t.revoked_at IS NULL
        AND (t.expires_at IS NULL OR t.expires_at > coalesce(%(now)s::timestamptz, now())))
           AS active
FROM api_tokens t JOIN users u ON u.id = t.user_id
WHERE t.id = %(id)s;

-- name: token_revoke
-- A token stops working at once; revoking twice changes nothing.
UPDATE api_tokens SET revoked_at = coalesce(%(now)s::timestamptz, now())
WHERE id = %(id)s AND revoked_at IS NULL
RETURNING id, name, prefix, scope, user_id, expires_at;

-- name: token_by_id
SELECT t.id, t.name, t.prefix, t.scope, t.revoked_at, u.username
FROM api_tokens t JOIN users u ON u.id = t.user_id WHERE t.id = %(id)s;

-- name: token_user_choices
-- (read) who a token can be made for: users not disabled.
SELECT username, role FROM users WHERE NOT disabled ORDER BY username;
