//! Role keys: the dev runner signs each role's requests as that role, so the emulator's request log
//! says which function made each call.

/// `DOCPIPE_DEV_ROLE_KEYS=1`: every role the dev runner plays signs its requests with an access
/// key id of its own, `docpipe-<role>`, as each function has a role of its own in AWS: each
/// function process (`store`, `parse`, `index`, `dlq`), each queue's poller (Lambda's event source
/// mapping, which uses its function's role), the sweeper, and the API (which then must be a process
/// of its own, `docpipe dev --api-only`); the runner's own set-up of the queues signs as
/// `docpipe-dev-runner`.
/// The emulator accepts any key, so its request log tells which function made each call:
/// `scripts/iam-check.sh` replays them against the template's policies. Off by default.
pub const ROLE_KEYS_VAR: &str = "DOCPIPE_DEV_ROLE_KEYS";

pub fn role_keys() -> bool {
    std::env::var(ROLE_KEYS_VAR).is_ok_and(|v| v == "1")
}

pub fn role_access_key(role: &str) -> String {
    format!("docpipe-{role}")
}
