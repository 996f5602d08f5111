//! Errors as text: one line with the whole source chain, for logs and `error_message` columns.

/// Formats an error with its whole source chain, for logs and `error_message` columns.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}
