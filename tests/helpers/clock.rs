//! The template's clock, shrunk for the tests.

use crate::*;

/// The tests' time scale: every wait of the template shrunk by this factor (the work is not).
pub const TEST_TIME_SCALE: f64 = 0.01;
/// A scaled function timeout never goes below this: the slowest stage of a test document in a
/// debug build on a 2-core machine (a law parsed and indexed with e5 takes a few seconds) fits.
pub const TEST_TIMEOUT_FLOOR_SECS: f64 = 20.0;

/// The template's clock (its Globals' values), at `scale` with the tests' timeout floor.
pub fn template_clock(scale: f64) -> docpipe_core::clock::Clock {
    clock_from(clock_env(scale).into_iter().collect())
}

/// A clock from explicit variables, checked as a function checks it at start.
pub fn clock_from(vars: std::collections::HashMap<String, String>) -> docpipe_core::clock::Clock {
    let mut env = docpipe_core::env::EnvReader::with_lookup(move |k| vars.get(k).cloned());
    let clock = docpipe_core::clock::Clock::read(&mut env);
    env.finish().expect("a consistent clock");
    clock
}

/// The variables a function process of the tests' clock gets (the template's, plus the scale).
pub fn clock_env(scale: f64) -> Vec<(String, String)> {
    let template = docpipe_cli::template::Template::load(&workspace_root().join("template.yaml"))
        .expect("template.yaml");
    let mut vars = template.clock_env().expect("the template's clock");
    vars.push(("DOCPIPE_TIME_SCALE".into(), scale.to_string()));
    vars.push((
        "DOCPIPE_TIMEOUT_FLOOR_SECS".into(),
        TEST_TIMEOUT_FLOOR_SECS.to_string(),
    ));
    vars
}
