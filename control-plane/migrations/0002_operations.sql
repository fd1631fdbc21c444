CREATE TABLE pauses (
    namespace TEXT NOT NULL,
    destination TEXT NOT NULL,
    paused_by TEXT NOT NULL,
    paused_at_micros BIGINT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (namespace, destination)
);

CREATE TABLE audit (
    id TEXT NOT NULL PRIMARY KEY,
    at_micros BIGINT NOT NULL,
    actor TEXT NOT NULL,
    verb TEXT NOT NULL,
    namespace TEXT NOT NULL,
    subject TEXT NOT NULL,
    detail TEXT NOT NULL,
    result TEXT NOT NULL
);

CREATE INDEX audit_by_namespace ON audit (namespace, at_micros);

CREATE TABLE redrives (
    namespace TEXT NOT NULL PRIMARY KEY,
    id TEXT NOT NULL,
    state TEXT NOT NULL,
    started_by TEXT NOT NULL,
    started_at_micros BIGINT NOT NULL,
    updated_at_micros BIGINT NOT NULL,
    finished_at_micros BIGINT NOT NULL,
    request TEXT NOT NULL,
    progress TEXT NOT NULL
);

CREATE TABLE redrive_positions (
    namespace TEXT NOT NULL,
    filter_key TEXT NOT NULL,
    since_micros BIGINT,
    until_micros BIGINT,
    positions TEXT NOT NULL,
    redriven BIGINT NOT NULL,
    PRIMARY KEY (namespace, filter_key)
);
