-- The authority's SQLite schema version 1 as released: the tests that open an old database (the
-- store's migrations, the wallet backfill) start from it. A copy, not taken from the store, so an
-- edit of the store's first migration cannot hide here. Never edit it.
CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
CREATE TABLE accounts (id TEXT PRIMARY KEY, app_id TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE contacts (
    app_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('email', 'phone')),
    value TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    verified_at INTEGER,
    PRIMARY KEY (app_id, kind, value)
);
CREATE INDEX contacts_account ON contacts(account_id);
CREATE TABLE wallets (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL UNIQUE REFERENCES accounts(id),
    created_at INTEGER NOT NULL
);
CREATE TABLE challenges (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL,
    device_id TEXT NOT NULL,
    contact_kind TEXT NOT NULL CHECK (contact_kind IN ('email', 'phone')),
    contact_value TEXT NOT NULL,
    account_key TEXT NOT NULL,
    code_hash BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    wrong_attempts INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL CHECK (state IN ('pending', 'used', 'retired', 'locked'))
);
CREATE INDEX challenges_device ON challenges(app_id, device_id, state);
CREATE INDEX challenges_account ON challenges(app_id, account_key, state);
CREATE INDEX challenges_expiry ON challenges(expires_at);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL,
    account_id TEXT NOT NULL REFERENCES accounts(id),
    device_id TEXT NOT NULL,
    access_hash BLOB NOT NULL UNIQUE,
    refresh_hash BLOB NOT NULL UNIQUE,
    access_expires_at INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    revoke_reason TEXT
);
CREATE INDEX sessions_account ON sessions(account_id, revoked_at);
INSERT INTO schema_version (version, applied_at) VALUES (1, 0);
