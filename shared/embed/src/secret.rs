use std::fmt;

/// A credential that never prints: `Debug` and `Display` show a placeholder, so it can sit in a
/// config struct that gets logged. Read it with [`Secret::expose`], only where it is sent.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints() {
        let s = Secret::new("sk-live-123");
        assert!(!format!("{s} {s:?} {:?}", Some(&s)).contains("sk-live"));
        assert_eq!(s.expose(), "sk-live-123");
    }
}
