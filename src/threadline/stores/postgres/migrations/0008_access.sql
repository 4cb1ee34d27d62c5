-- Access to the HTTP service. A bearer token is an admin token or bound to one user; only a
-- hash of its secret is kept (the secret is shown once, when it is created). A revoked token
-- is kept, with when, so listings say what it was.
CREATE TABLE api_tokens (
    id          text PRIMARY KEY,
    secret_hash text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('admin', 'user')),
    user_id     text,
    name        text,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    CHECK ((role = 'admin') = (user_id IS NULL))
);

-- Whose conversation it is: the user of the token that created it (NULL: no one's, so only
-- admin tokens reach it). A user token lists by it.
ALTER TABLE conversations ADD COLUMN owner text;
CREATE INDEX conversations_by_owner ON conversations (owner);
