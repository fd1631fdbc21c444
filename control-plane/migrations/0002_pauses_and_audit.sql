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
