-- imagegate schema for SQLite. Times are milliseconds since the Unix epoch.

CREATE TABLE users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    name          TEXT    NOT NULL UNIQUE,
    is_admin      BOOLEAN NOT NULL DEFAULT FALSE,
    password_hash TEXT,
    created_at    INTEGER NOT NULL
);

CREATE TABLE groups (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

INSERT INTO groups (name, created_at) VALUES ('default', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));

CREATE TABLE api_keys (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    public_id       TEXT    NOT NULL UNIQUE,
    secret_sha256   TEXT    NOT NULL,
    user_id         INTEGER NOT NULL REFERENCES users (id),
    group_id        INTEGER NOT NULL REFERENCES groups (id),
    name            TEXT    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'active',
    max_concurrency INTEGER,
    rpm             INTEGER,
    fallback_ladder BOOLEAN NOT NULL DEFAULT FALSE,
    created_at      INTEGER NOT NULL,
    last_used_at    INTEGER
);

CREATE INDEX api_keys_user_id ON api_keys (user_id);

CREATE TABLE accounts (
    id                   INTEGER PRIMARY KEY AUTOINCREMENT,
    name                 TEXT    NOT NULL UNIQUE,
    kind                 TEXT    NOT NULL,
    base_url             TEXT,
    tier                 TEXT    NOT NULL,
    priority             INTEGER NOT NULL DEFAULT 0,
    concurrency_standard INTEGER NOT NULL DEFAULT 4,
    concurrency_large    INTEGER NOT NULL DEFAULT 1,
    status               TEXT    NOT NULL DEFAULT 'active',
    status_reason        TEXT,
    main_model           TEXT,
    fallback_models      TEXT    NOT NULL DEFAULT '[]',
    credential           BLOB,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);

CREATE TABLE account_groups (
    account_id INTEGER NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    group_id   INTEGER NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    PRIMARY KEY (account_id, group_id)
);

-- No foreign keys: usage is history and outlives the accounts and keys it names.
CREATE TABLE usage_records (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id          TEXT    NOT NULL UNIQUE,
    created_at          INTEGER NOT NULL,
    endpoint            TEXT    NOT NULL,
    model               TEXT    NOT NULL,
    size_requested      TEXT,
    size_produced       TEXT,
    quality_requested   TEXT,
    quality_produced    TEXT,
    output_format       TEXT,
    n                   INTEGER NOT NULL,
    images              INTEGER NOT NULL,
    stream              BOOLEAN NOT NULL,
    status              INTEGER NOT NULL,
    error_code          TEXT,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    total_tokens        INTEGER NOT NULL DEFAULT 0,
    input_text_tokens   INTEGER,
    input_image_tokens  INTEGER,
    output_text_tokens  INTEGER,
    output_image_tokens INTEGER,
    latency_ms          INTEGER NOT NULL,
    ttfb_ms             INTEGER,
    account_id          INTEGER,
    group_id            INTEGER,
    user_id             INTEGER,
    key_id              INTEGER,
    fallback_note       TEXT
);

CREATE INDEX usage_records_created_at ON usage_records (created_at);
CREATE INDEX usage_records_user_created ON usage_records (user_id, created_at);
CREATE INDEX usage_records_key_created ON usage_records (key_id, created_at);
CREATE INDEX usage_records_account_created ON usage_records (account_id, created_at);
