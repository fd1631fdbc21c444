CREATE TABLE cancellations (
    namespace TEXT NOT NULL,
    entry_id TEXT NOT NULL,
    cancelled_by TEXT NOT NULL,
    cancelled_at_micros BIGINT NOT NULL,
    reason TEXT NOT NULL,
    expires_at_micros BIGINT NOT NULL,
    PRIMARY KEY (namespace, entry_id)
);

CREATE INDEX cancellations_by_expiry ON cancellations (expires_at_micros);
