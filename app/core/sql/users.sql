-- People who sign in to the dashboard, their sessions, one-time sign-in links and failed
-- sign-ins (rate limiting). Session and link ids are HMACs of the secret the browser holds.

-- name: user_insert
INSERT INTO users (username, password_hash, role)
VALUES (%(username)s, %(password_hash)s, %(role)s)
ON CONFLICT (username) DO NOTHING
RETURNING id, username, role;

-- name: user_by_name
SELECT id, username, password_hash, role, disabled FROM users WHERE username = %(username)s;

-- name: user_set_password_hash
-- A rehash with current argon2 parameters after a successful sign-in.
UPDATE users SET password_hash = %(password_hash)s WHERE id = %(id)s;

-- name: login_failure_count
-- Failed sign-ins within the window: for this name from this address, from this address
-- for any name (password spraying), and for this name from any address.
SELECT count(*) FILTER (WHERE username = %(username)s AND address = %(address)s) AS pair,
       count(*) FILTER (WHERE address = %(address)s) AS from_address,
       count(*) FILTER (WHERE username = %(username)s) AS for_account
FROM login_failures
WHERE (username = %(username)s OR address = %(address)s)
  AND at > coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s);

-- name: login_failure_insert
-- Record a failure; failures older than the window are forgotten on the way.
WITH expired AS (
    DELETE FROM login_failures
    WHERE at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s)
)
INSERT INTO login_failures (username, address, at)
VALUES (%(username)s, %(address)s, coalesce(%(now)s::timestamptz, now()));

-- name: login_failure_clear
-- A successful sign-in forgets this name's failures from this address, and old ones go.
DELETE FROM login_failures
WHERE (username = %(username)s AND address = %(address)s)
   OR at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(window_seconds)s);

-- name: session_insert
INSERT INTO web_sessions (id, user_id, expires_at)
VALUES (%(id)s, %(user_id)s,
        coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lifetime_seconds)s));

-- name: session_user
-- The signed-in person of a session that has not expired (and is not disabled).
SELECT u.id, u.username, u.role
FROM web_sessions s
JOIN users u ON u.id = s.user_id
WHERE s.id = %(id)s AND s.expires_at > coalesce(%(now)s::timestamptz, now())
  AND NOT u.disabled;

-- name: session_delete
DELETE FROM web_sessions
WHERE id = %(id)s OR expires_at < coalesce(%(now)s::timestamptz, now());

-- name: sign_in_link_insert
-- A new link; expired ones are deleted on the way.
WITH expired AS (
    DELETE FROM sign_in_links WHERE expires_at < coalesce(%(now)s::timestamptz, now())
)
INSERT INTO sign_in_links (id, user_id, expires_at)
VALUES (%(id)s, %(user_id)s,
        coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lifetime_seconds)s));

-- name: sign_in_link_use
-- A link works once: using it deletes it.
DELETE FROM sign_in_links l
USING users u
WHERE l.id = %(id)s AND u.id = l.user_id AND NOT u.disabled
  AND l.expires_at > coalesce(%(now)s::timestamptz, now())
RETURNING u.id, u.username, u.role;
