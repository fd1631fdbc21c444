"""Programs built on wal_client: the conformance runner and the bench."""
