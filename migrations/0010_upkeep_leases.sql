-- upkeep_leases: one row per background job that must not run twice at once (the sweeper). A run
-- takes the lease for as long as its function may live, and gives it back when it ends; a run that
-- died leaves it to expire. EventBridge retries a scheduled invocation and nothing else stops two
-- sweeps from overlapping.
CREATE TABLE IF NOT EXISTS upkeep_leases (
    name       VARCHAR(64)  PRIMARY KEY,
    holder     VARCHAR(128) NOT NULL,
    expires_at TIMESTAMPTZ  NOT NULL
);
