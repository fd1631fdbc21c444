CREATE TABLE IF NOT EXISTS namespace_versions (
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    config TEXT,
    author TEXT NOT NULL,
    created_at_micros BIGINT NOT NULL,
    changes TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
