//! Every duration the pipeline waits on, in one place: the template's parameters reach each
//! function's environment (`DOCPIPE_*_SECS`), and [`Clock::read`] takes them from there and refuses
//! a set that cannot work. The dev runner and the tests read the same template and may shrink the
//! waits with `DOCPIPE_TIME_SCALE` (visibility, backoff, lease, sweep period, retention, grace);
//! the work is never shrunk, so a scaled function timeout keeps a floor
//! (`DOCPIPE_TIMEOUT_FLOOR_SECS`) that the work on a slow machine fits in.
//!
//! There are no defaults here: a value the template does not give is a configuration error, so a
//! timing cannot be written twice and disagree.

use crate::env::EnvReader;
use std::time::Duration;

/// One queue-driven function: how long an invocation may run, and how long its queue hides a
/// message that was handed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageClock {
    pub function_timeout: Duration,
    pub visibility: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    pub store: StageClock,
    pub parse: StageClock,
    pub index: StageClock,
    /// The DLQ function and the three dead-letter queues it drains: Lambda refuses an event source
    /// whose queue hides a message for less time than its function may run.
    pub dead_letter: StageClock,
    /// Deliveries of one message before its queue moves it to the dead-letter queue.
    pub max_receive_count: u32,
    /// How long a queue keeps a message (`MessageRetentionPeriod`).
    pub retention: Duration,
    /// The first backoff after a transient failure; each further delivery doubles it, up to the cap.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long a worker's claim on a run lasts; renewed every third of it while it works.
    pub lease: Duration,
    /// How often the sweeper may send a lost job again before the run fails.
    pub redrive_limit: u32,
    /// Attempts of one stage that may die (a timeout, memory run out: the worker stopped renewing
    /// its lease) before the run fails with that reason, rather than wait for the queue's whole
    /// receive count.
    pub max_abandoned_attempts: u32,
    pub sweep_period: Duration,
    /// How long a job must have been queued before an empty queue counts as proof it was lost
    /// (SQS's message counts are approximate and lag by up to a minute).
    pub lost_job_grace: Duration,
    /// 1 in AWS; below 1 in the dev runner's drills and the tests.
    pub scale: f64,
}

/// The environment variables the template sets, in the template's order.
pub const VARIABLES: &[&str] = &[
    "DOCPIPE_STORE_TIMEOUT_SECS",
    "DOCPIPE_PARSE_TIMEOUT_SECS",
    "DOCPIPE_INDEX_TIMEOUT_SECS",
    "DOCPIPE_STORE_VISIBILITY_SECS",
    "DOCPIPE_PARSE_VISIBILITY_SECS",
    "DOCPIPE_INDEX_VISIBILITY_SECS",
    "DOCPIPE_DLQ_TIMEOUT_SECS",
    "DOCPIPE_DLQ_VISIBILITY_SECS",
    "DOCPIPE_MAX_RECEIVE_COUNT",
    "DOCPIPE_QUEUE_RETENTION_SECS",
    "DOCPIPE_BACKOFF_BASE_SECS",
    "DOCPIPE_BACKOFF_MAX_SECS",
    "DOCPIPE_LEASE_SECS",
    "DOCPIPE_REDRIVE_LIMIT",
    "DOCPIPE_MAX_ABANDONED_ATTEMPTS",
    "DOCPIPE_SWEEP_PERIOD_MINUTES",
    "DOCPIPE_LOST_JOB_GRACE_SECS",
];

/// SQS's own bounds: visibility and delay up to 12 hours, retention from 60 s to 14 days.
const SQS_MAX_VISIBILITY_SECS: f64 = 43_200.0;
const SQS_MIN_RETENTION_SECS: f64 = 60.0;
const SQS_MAX_RETENTION_SECS: f64 = 1_209_600.0;

impl Clock {
    /// Reads the template's values and the scale, then checks them. Every problem is reported.
    /// A missing or malformed value is recorded in `env` (and reads as 0 here).
    pub fn read<F: Fn(&str) -> Option<String>>(env: &mut EnvReader<F>) -> Clock {
        let scale: f64 = env.parsed_or("DOCPIPE_TIME_SCALE", 1.0);
        let floor: f64 = env.parsed_or("DOCPIPE_TIMEOUT_FLOOR_SECS", 0.0);
        let mut secs = |name: &str| -> f64 {
            let raw = env.required(name);
            if raw.is_empty() {
                return 0.0;
            }
            match raw.parse::<f64>() {
                Ok(v) if v >= 0.0 && v.is_finite() => v,
                _ => {
                    env.problem(format!("{name} must be a non-negative number, got {raw:?}"));
                    0.0
                }
            }
        };
        let raw = RawClock {
            timeouts: [
                secs("DOCPIPE_STORE_TIMEOUT_SECS"),
                secs("DOCPIPE_PARSE_TIMEOUT_SECS"),
                secs("DOCPIPE_INDEX_TIMEOUT_SECS"),
                secs("DOCPIPE_DLQ_TIMEOUT_SECS"),
            ],
            visibilities: [
                secs("DOCPIPE_STORE_VISIBILITY_SECS"),
                secs("DOCPIPE_PARSE_VISIBILITY_SECS"),
                secs("DOCPIPE_INDEX_VISIBILITY_SECS"),
                secs("DOCPIPE_DLQ_VISIBILITY_SECS"),
            ],
            max_receive_count: secs("DOCPIPE_MAX_RECEIVE_COUNT"),
            retention: secs("DOCPIPE_QUEUE_RETENTION_SECS"),
            backoff_base: secs("DOCPIPE_BACKOFF_BASE_SECS"),
            backoff_max: secs("DOCPIPE_BACKOFF_MAX_SECS"),
            lease: secs("DOCPIPE_LEASE_SECS"),
            redrive_limit: secs("DOCPIPE_REDRIVE_LIMIT"),
            max_abandoned_attempts: secs("DOCPIPE_MAX_ABANDONED_ATTEMPTS"),
            sweep_minutes: secs("DOCPIPE_SWEEP_PERIOD_MINUTES"),
            grace: secs("DOCPIPE_LOST_JOB_GRACE_SECS"),
        };
        let complete = env.is_clean();
        let scale = if scale > 0.0 && scale <= 1.0 {
            scale
        } else {
            env.problem(format!("DOCPIPE_TIME_SCALE must be in (0, 1], got {scale}"));
            1.0
        };
        let clock = raw.build(scale, floor);
        if complete {
            for problem in clock.problems() {
                env.problem(problem);
            }
        }
        clock
    }

    /// The problems of one function's environment as the template gives it (no scale): what
    /// [`Clock::read`] would refuse at start. `make deploy-check` asks this through
    /// `docpipe clock-check`, so that the rules live here alone.
    pub fn problems_of(values: &std::collections::HashMap<String, String>) -> Vec<String> {
        let mut env = EnvReader::with_lookup(|name: &str| {
            values.get(name).filter(|v| !v.is_empty()).cloned()
        });
        Clock::read(&mut env);
        env.finish().err().map(|e| e.problems).unwrap_or_default()
    }

    /// What makes a set of timings unworkable, in words a deployer can act on.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        self.queue_problems(&mut problems);
        self.limit_problems(&mut problems);
        problems
    }

    /// What the queues' timing must satisfy against the functions': visibility against each
    /// function's timeout and the lease, retention against a whole retry cycle.
    fn queue_problems(&self, problems: &mut Vec<String>) {
        // Every queue with an event source: Lambda refuses to create the mapping when the queue's
        // visibility timeout is below the function's timeout (InvalidParameterValueException).
        let sources = [
            ("store", self.store),
            ("parse", self.parse),
            ("index", self.index),
            ("dead-letter", self.dead_letter),
        ];
        for (name, stage) in sources {
            if stage.visibility < stage.function_timeout {
                problems.push(format!(
                    "the {name} queue's visibility timeout ({} s) is shorter than the {name} function's timeout ({} s): Lambda refuses such an event source, and a message would be handed to a second worker while the first still runs",
                    stage.visibility.as_secs_f64(), stage.function_timeout.as_secs_f64()
                ));
            }
            if stage.visibility.as_secs_f64() > SQS_MAX_VISIBILITY_SECS {
                problems.push(format!(
                    "the {name} queue's visibility timeout ({} s) is over SQS's 12 hours",
                    stage.visibility.as_secs_f64()
                ));
            }
        }
        let stages = [
            ("store", self.store),
            ("parse", self.parse),
            ("index", self.index),
        ];
        for (name, stage) in stages {
            let cycle = self.retry_cycle(stage);
            if self.retention < cycle {
                problems.push(format!(
                    "the queues' retention ({} s) is shorter than a full retry cycle of {name} ({} s: {} deliveries with their backoffs, a sweep and the grace period): a message could expire while it is still being retried",
                    self.retention.as_secs_f64(), cycle.as_secs_f64(), self.max_receive_count
                ));
            }
        }
        for (name, stage) in [("parse", self.parse), ("index", self.index)] {
            if self.lease > stage.visibility {
                problems.push(format!(
                    "the lease ({} s) is longer than the {name} queue's visibility timeout ({} s): a redelivery would find a dead worker's lease still held",
                    self.lease.as_secs_f64(), stage.visibility.as_secs_f64()
                ));
            }
        }
    }

    /// The limits each value must keep on its own or against one other: AWS's ranges, the
    /// abandoned attempts below the receive count, the backoff below its cap.
    fn limit_problems(&self, problems: &mut Vec<String>) {
        if self.max_abandoned_attempts == 0 || self.max_abandoned_attempts >= self.max_receive_count
        {
            problems.push(format!(
                "the abandoned attempts a run may have ({}) must be at least 1 and below the max receive count ({}): the run must fail with its reason before its message is dead-lettered",
                self.max_abandoned_attempts, self.max_receive_count
            ));
        }
        if self.lease < Duration::from_secs(3) {
            problems.push(format!(
                "the lease ({} s) must be at least 3 s (it is renewed every third of it)",
                self.lease.as_secs_f64()
            ));
        }
        if self.max_receive_count == 0 || self.max_receive_count > 1000 {
            problems.push(format!(
                "the max receive count ({}) must be from 1 to 1000",
                self.max_receive_count
            ));
        }
        if self.backoff_base.is_zero() || self.backoff_base > self.backoff_max {
            problems.push(format!(
                "the backoff must start above 0 and at most at its cap ({} s, cap {} s)",
                self.backoff_base.as_secs_f64(),
                self.backoff_max.as_secs_f64()
            ));
        }
        if self.backoff_max.as_secs_f64() > SQS_MAX_VISIBILITY_SECS {
            problems.push(format!(
                "the backoff cap ({} s) is over SQS's 12-hour visibility limit",
                self.backoff_max.as_secs_f64()
            ));
        }
        let retention = self.retention.as_secs_f64();
        if !(SQS_MIN_RETENTION_SECS..=SQS_MAX_RETENTION_SECS).contains(&retention) {
            problems.push(format!(
                "the queues' retention ({retention} s) must be from 60 s to 14 days"
            ));
        }
        if self.sweep_period.is_zero() {
            problems.push("the sweep period must be above 0".into());
        }
        if self.lost_job_grace < self.sweep_period.min(self.scaled(60.0)) {
            problems.push(format!(
                "the lost-job grace ({} s) must cover SQS's approximate counts (a minute, scaled)",
                self.lost_job_grace.as_secs_f64()
            ));
        }
    }

    /// The longest one message can live while it is retried: each delivery runs to its timeout and
    /// then backs off at the cap (or, when the worker dies, waits out the visibility timeout); then
    /// the sweeper needs a period and the grace to notice.
    pub(crate) fn retry_cycle(&self, stage: StageClock) -> Duration {
        let per_delivery = stage
            .visibility
            .max(stage.function_timeout + self.backoff_max);
        per_delivery * self.max_receive_count + self.sweep_period + self.lost_job_grace
    }

    /// The backoff before delivery `receive_count + 1`: base × 2^(receive_count − 1), capped, in
    /// whole seconds as SQS takes them.
    pub fn backoff(&self, receive_count: u32) -> Duration {
        let exponent = receive_count.saturating_sub(1).min(30);
        let secs = self.backoff_base.as_secs_f64() * f64::from(1u32 << exponent);
        let secs = secs.min(self.backoff_max.as_secs_f64()).ceil().max(1.0);
        Duration::from_secs(secs as u64)
    }

    /// The longest outage of a dependency one job outlives: the backoffs between its first
    /// delivery and its last (each delivery's own work comes on top).
    pub fn outage_outlasted(&self) -> Duration {
        (1..self.max_receive_count).map(|n| self.backoff(n)).sum()
    }

    fn scaled(&self, secs: f64) -> Duration {
        Duration::from_secs_f64(secs * self.scale)
    }

    /// A wait of the template's (in seconds) on this clock, as a queue attribute takes it: scaled,
    /// at least a second.
    pub fn scaled_secs(&self, secs: f64) -> Duration {
        Duration::from_secs_f64((secs * self.scale).max(1.0).ceil())
    }
}

/// A duration in whole seconds, rounded up, as SQS attributes take it.
pub fn whole_secs(d: Duration) -> i32 {
    d.as_secs_f64().ceil() as i32
}

struct RawClock {
    timeouts: [f64; 4],
    visibilities: [f64; 4],
    max_receive_count: f64,
    retention: f64,
    backoff_base: f64,
    backoff_max: f64,
    lease: f64,
    redrive_limit: f64,
    max_abandoned_attempts: f64,
    sweep_minutes: f64,
    grace: f64,
}

impl RawClock {
    fn build(self, scale: f64, floor: f64) -> Clock {
        let wait = |v: f64| Duration::from_secs_f64((v * scale).max(1.0).ceil());
        let stage = |i: usize| -> StageClock {
            let timeout = self.timeouts[i];
            let visibility = self.visibilities[i];
            let scaled = (timeout * scale).max(1.0);
            let function_timeout = Duration::from_secs_f64(scaled.max(floor));
            // The floor must not break the rule it exists beside: where it lifted a scaled
            // timeout, the queue still hides a message for at least as long as an invocation may
            // run. The template's own values are never lifted: they are checked as they are.
            let visibility = if floor > scaled {
                wait(visibility).max(Duration::from_secs_f64(
                    function_timeout.as_secs_f64().ceil(),
                ))
            } else {
                wait(visibility)
            };
            StageClock {
                function_timeout,
                visibility,
            }
        };
        Clock {
            store: stage(0),
            parse: stage(1),
            index: stage(2),
            dead_letter: stage(3),
            max_receive_count: self.max_receive_count as u32,
            retention: wait(self.retention),
            backoff_base: wait(self.backoff_base),
            backoff_max: wait(self.backoff_max),
            lease: wait(self.lease).max(Duration::from_secs(3)),
            redrive_limit: self.redrive_limit as u32,
            max_abandoned_attempts: self.max_abandoned_attempts as u32,
            sweep_period: wait(self.sweep_minutes * 60.0),
            lost_job_grace: wait(self.grace),
            scale,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The template's defaults, as a deployment gets them.
    fn template_like() -> HashMap<&'static str, &'static str> {
        HashMap::from([
            ("DOCPIPE_STORE_TIMEOUT_SECS", "60"),
            ("DOCPIPE_PARSE_TIMEOUT_SECS", "300"),
            ("DOCPIPE_INDEX_TIMEOUT_SECS", "600"),
            ("DOCPIPE_STORE_VISIBILITY_SECS", "360"),
            ("DOCPIPE_PARSE_VISIBILITY_SECS", "1800"),
            ("DOCPIPE_INDEX_VISIBILITY_SECS", "3600"),
            ("DOCPIPE_DLQ_TIMEOUT_SECS", "60"),
            ("DOCPIPE_DLQ_VISIBILITY_SECS", "360"),
            ("DOCPIPE_MAX_RECEIVE_COUNT", "5"),
            ("DOCPIPE_QUEUE_RETENTION_SECS", "345600"),
            ("DOCPIPE_BACKOFF_BASE_SECS", "30"),
            ("DOCPIPE_BACKOFF_MAX_SECS", "900"),
            ("DOCPIPE_LEASE_SECS", "120"),
            ("DOCPIPE_REDRIVE_LIMIT", "3"),
            ("DOCPIPE_MAX_ABANDONED_ATTEMPTS", "3"),
            ("DOCPIPE_SWEEP_PERIOD_MINUTES", "5"),
            ("DOCPIPE_LOST_JOB_GRACE_SECS", "600"),
        ])
    }

    fn read(vars: HashMap<&'static str, &'static str>) -> Result<Clock, String> {
        let mut env = EnvReader::with_lookup(move |k| vars.get(k).map(|v| v.to_string()));
        let clock = Clock::read(&mut env);
        env.finish().map_err(|e| e.to_string())?;
        Ok(clock)
    }

    #[test]
    fn the_deploy_check_reads_the_same_rules() {
        let owned = |vars: HashMap<&str, &str>| -> HashMap<String, String> {
            vars.into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            Clock::problems_of(&owned(template_like())),
            Vec::<String>::new()
        );
        let mut long_lease = template_like();
        long_lease.insert("DOCPIPE_LEASE_SECS", "2000");
        let problems = Clock::problems_of(&owned(long_lease.clone()));
        assert_eq!(
            problems.join("; "),
            read(long_lease)
                .unwrap_err()
                .trim_start_matches("invalid configuration: ")
        );
        assert!(problems
            .iter()
            .any(|p| p.contains("lease (2000 s) is longer than the parse queue's")));
    }

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let clock = read(template_like()).unwrap();
        let waits: Vec<u64> = (1..=7).map(|n| clock.backoff(n).as_secs()).collect();
        assert_eq!(waits, [30, 60, 120, 240, 480, 900, 900]);
    }

    #[test]
    fn inconsistent_sets_are_refused_with_the_reason() {
        let mut short_visibility = template_like();
        short_visibility.insert("DOCPIPE_INDEX_VISIBILITY_SECS", "300");
        let err = read(short_visibility).unwrap_err();
        assert!(err.contains("index queue's visibility timeout (300 s) is shorter than the index function's timeout (600 s)"), "{err}");

        // SQS's default (30 s) under the DLQ function's 60 s: the stack would roll back.
        let mut default_dead_letter_visibility = template_like();
        default_dead_letter_visibility.insert("DOCPIPE_DLQ_VISIBILITY_SECS", "30");
        let err = read(default_dead_letter_visibility).unwrap_err();
        assert!(err.contains("dead-letter queue's visibility timeout (30 s) is shorter than the dead-letter function's timeout (60 s)"), "{err}");

        let mut long_lease = template_like();
        long_lease.insert("DOCPIPE_LEASE_SECS", "2000");
        let err = read(long_lease).unwrap_err();
        assert!(
            err.contains("lease (2000 s) is longer than the parse queue's visibility"),
            "{err}"
        );

        let mut short_retention = template_like();
        short_retention.insert("DOCPIPE_QUEUE_RETENTION_SECS", "3600");
        let err = read(short_retention).unwrap_err();
        assert!(
            err.contains("shorter than a full retry cycle of index"),
            "{err}"
        );

        let mut missing = template_like();
        missing.remove("DOCPIPE_REDRIVE_LIMIT");
        assert!(read(missing)
            .unwrap_err()
            .contains("DOCPIPE_REDRIVE_LIMIT is not set"));
    }

    #[test]
    fn a_scale_shrinks_the_waits_and_keeps_the_rules() {
        let mut vars = template_like();
        vars.insert("DOCPIPE_TIME_SCALE", "0.01");
        vars.insert("DOCPIPE_TIMEOUT_FLOOR_SECS", "20");
        let clock = read(vars).unwrap();
        assert_eq!(clock.index.visibility, Duration::from_secs(36));
        assert_eq!(clock.sweep_period, Duration::from_secs(3));
        // 60 s × 0.01 is below the floor; the queue's visibility follows the floor up.
        assert_eq!(clock.store.function_timeout, Duration::from_secs(20));
        assert_eq!(clock.store.visibility, Duration::from_secs(20));
        assert!(clock.problems().is_empty(), "{:?}", clock.problems());
    }
}
