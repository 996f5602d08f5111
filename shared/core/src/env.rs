//! Reading the environment: every missing or malformed variable is collected, so a misconfigured
//! deployment fails with one message that names them all. The configs ([`crate::config`]) and the
//! clock ([`crate::clock`]) read through it.

#[derive(Debug, thiserror::Error)]
#[error("invalid configuration: {}", .problems.join("; "))]
pub struct ConfigError {
    pub problems: Vec<String>,
}

/// Reads variables and collects every problem instead of stopping at the first.
pub struct EnvReader<F: Fn(&str) -> Option<String>> {
    lookup: F,
    pub(crate) problems: Vec<String>,
}

impl EnvReader<fn(&str) -> Option<String>> {
    pub fn from_process() -> Self {
        EnvReader {
            lookup: |name| std::env::var(name).ok().filter(|v| !v.is_empty()),
            problems: Vec::new(),
        }
    }
}

impl<F: Fn(&str) -> Option<String>> EnvReader<F> {
    pub fn with_lookup(lookup: F) -> Self {
        EnvReader {
            lookup,
            problems: Vec::new(),
        }
    }

    pub fn required(&mut self, name: &str) -> String {
        match (self.lookup)(name) {
            Some(v) => v,
            None => {
                self.problems.push(format!("{name} is not set"));
                String::new()
            }
        }
    }

    pub fn optional(&self, name: &str) -> Option<String> {
        (self.lookup)(name)
    }

    pub fn url(&mut self, name: &str) -> String {
        let value = self.required(name);
        if !(value.is_empty() || value.starts_with("http://") || value.starts_with("https://")) {
            self.problems
                .push(format!("{name} must be an http(s) URL, got {value:?}"));
        }
        value
    }

    pub fn parsed_or<T: std::str::FromStr>(&mut self, name: &str, default: T) -> T {
        match (self.lookup)(name) {
            None => default,
            Some(raw) => match raw.parse() {
                Ok(v) => v,
                Err(_) => {
                    self.problems
                        .push(format!("{name} has an invalid value {raw:?}"));
                    default
                }
            },
        }
    }

    /// Records a problem that a caller found in what it read.
    pub fn problem(&mut self, problem: impl Into<String>) {
        self.problems.push(problem.into());
    }

    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// The embedder `DOCPIPE_EMBEDDER` names, built from the variables it reads (through this
    /// reader, like every other variable). A problem is reported with the others by [`finish`].
    ///
    /// [`finish`]: EnvReader::finish
    pub fn embedder(&mut self) -> Option<std::sync::Arc<dyn docpipe_embed::Embedder>> {
        match docpipe_embed::from_vars(|name| (self.lookup)(name)) {
            Ok(embedder) => Some(embedder),
            Err(e) => {
                self.problems.push(crate::error::chain(&e));
                None
            }
        }
    }

    pub fn finish(self) -> Result<(), ConfigError> {
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError {
                problems: self.problems,
            })
        }
    }
}
