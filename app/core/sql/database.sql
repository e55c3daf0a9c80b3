-- Queries about the database server itself, before any schema exists.

-- name: database_exists
SELECT 1 FROM pg_database WHERE datname = %(name)s;

-- name: database_ping
-- The cheapest statement that proves the server answers.
SELECT 1;

-- name: database_revision
-- (read) the Alembic revision the schema is at.
SELECT version_num FROM alembic_version;
