-- The namespace configs and every version of each: a change or a deletion adds a row.
-- IF NOT EXISTS: a store made before migrations (its table made by the control plane at start-up)
-- is taken over as it is.
CREATE TABLE IF NOT EXISTS namespace_versions (
    name TEXT NOT NULL,
    version BIGINT NOT NULL,
    config TEXT,
    author TEXT NOT NULL,
    created_at_micros BIGINT NOT NULL,
    changes TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
