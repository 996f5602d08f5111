//! How the citing text leans on its target: 依照 apply, 参照 analogy, 除…外 exception, or a mention.

use std::ops::Range;

use serde::Serialize;

/// How the citing text leans on its target (立法技术规范（试行）（一）: 依照/按照, 参照, 除…外).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// 依照, 按照, 依据, 根据, 适用: the target's rule applies.
    Apply,
    /// 参照, 参照适用: applied by analogy.
    Analogy,
    /// 除…外: the target is an exception to the citing rule.
    Exception,
    /// Named without a verb that applies it (违反本法第X条规定的, 前款所称…).
    Mention,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Apply => "apply",
            Kind::Analogy => "analogy",
            Kind::Exception => "exception",
            Kind::Mention => "mention",
        }
    }
}

/// How close before a reference (or its list) a verb must stand to govern it: 依照本法…, 根据前款…,
/// 按照《…》… (a verb further back governs something else: 未按照约定履行…本法第…条规定的协议).
const VERB_REACH: usize = 4;

/// The kind of the reference at `span` of `line` whose list began at `group`: read in its clause
/// (from the last 。，；： before the list), and in its sentence after it for "…的规定，适用于…".
pub(super) fn kind_of(line: &str, group: usize, span: &Range<usize>) -> Kind {
    const BOUNDS: [char; 8] = ['，', '。', '；', '：', ',', ';', ':', '\n'];
    let group = group.min(span.start);
    let clause_start = line[..group]
        .rfind(BOUNDS)
        .map(|i| i + line[i..].chars().next().map_or(1, char::len_utf8))
        .unwrap_or(0);
    let clause_end = line[span.end..]
        .find(['，', '。', '；', ',', ';'])
        .map(|i| span.end + i)
        .unwrap_or(line.len());
    let sentence_end = line[span.end..]
        .find(['。', '；', ';'])
        .map(|i| span.end + i)
        .unwrap_or(line.len());
    let before = &line[clause_start..group];
    let after = &line[span.end..clause_end];
    if before.contains('除') && after.contains('外') {
        return Kind::Exception;
    }
    // The verb's distance to the list, in characters.
    let near = |at: usize, word: &str| before[at + word.len()..].chars().count() <= VERB_REACH;
    let last = |words: &[&'static str]| -> Option<usize> {
        words
            .iter()
            .filter_map(|w| before.rfind(w).filter(|at| near(*at, w)))
            .max()
    };
    if let Some(at) = last(&["参照"]) {
        if !before[at..].contains("依照") {
            return Kind::Analogy;
        }
    }
    if last(&["依照", "按照", "依据", "根据", "适用", "按"]).is_some()
        || line[span.end..sentence_end].contains("适用于")
    {
        return Kind::Apply;
    }
    Kind::Mention
}
