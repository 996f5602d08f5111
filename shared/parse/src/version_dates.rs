//! When a version of a regulation was made and when it took effect, read from the regulation's
//! own text, with where each date came from.
//!
//! Chinese statutes carry their history under the title, as heading notes: "1988年9月5日 …通过",
//! "2010年4月29日 …修订", "…修正", "…公布", sometimes "2022年5月1日 施行". Their last article
//! usually says when they take effect: "本法自2024年5月1日起施行". The two disagree more often than
//! not once a law has been amended: a 修正 rewrites a few articles and leaves the 施行 article of
//! the original, so "本法自1989年5月1日起施行" in the 2012 text is the 1989 law's date. A 修正 (or a
//! 修订 by decision) takes effect when it is published unless it says otherwise, and what it says
//! otherwise is in the amending decision, not in the consolidated text.
//!
//! So: the version's date is its last heading note (or the date its file is named after, when the
//! notes stop short of it); it takes effect on a 施行 note if there is one, else on the 施行
//! article's date when that is not before the version's date, else when it was published. Every
//! choice is recorded with its reason.

use serde::Serialize;
use std::fmt;

/// A calendar day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct Day {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl Day {
    /// A real calendar day, or none.
    pub fn new(year: u32, month: u32, day: u32) -> Option<Day> {
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return None,
        };
        ((1000..=9999).contains(&year) && (1..=days).contains(&day)).then_some(Day {
            year: year as u16,
            month: month as u8,
            day: day as u8,
        })
    }

    /// `YYYY-MM-DD`, nothing else.
    pub fn parse_iso(s: &str) -> Option<Day> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            s.get(r)
                .filter(|p| p.bytes().all(|c| c.is_ascii_digit()))?
                .parse()
                .ok()
        };
        Day::new(num(0..4)?, num(5..7)?, num(8..10)?)
    }
}

impl fmt::Display for Day {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl From<Day> for String {
    fn from(d: Day) -> String {
        d.to_string()
    }
}

/// What a heading note says happened on its date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Act {
    /// 通过: adopted.
    Adopted,
    /// 修正: amended by a decision.
    Amended,
    /// 修订: revised as a whole.
    Revised,
    /// 公布, 发布: promulgated.
    Promulgated,
    /// 批准: approved.
    Approved,
    /// 施行: takes effect.
    TakesEffect,
}

impl Act {
    fn from_word(w: &str) -> Option<Act> {
        Some(match w {
            "通过" => Act::Adopted,
            "修正" => Act::Amended,
            "修订" => Act::Revised,
            "公布" | "发布" => Act::Promulgated,
            "批准" => Act::Approved,
            "施行" => Act::TakesEffect,
            _ => return None,
        })
    }
}

const ACT_WORDS: [&str; 7] = ["通过", "修正", "修订", "公布", "发布", "批准", "施行"];

/// One heading note: a date and what happened on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub day: Day,
    pub act: Act,
}

/// Where a date came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Given with the upload.
    Upload,
    /// A heading note under the title.
    HeadingNote,
    /// The article that says when the text takes effect (…自…起施行).
    EffectArticle,
    /// The date in the file's name ("…(2019-03-24).md"), later than any heading note.
    FileName,
    /// Not stated for this version: it takes effect when published.
    Publication,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Upload => "upload",
            Source::HeadingNote => "heading_note",
            Source::EffectArticle => "effect_article",
            Source::FileName => "file_name",
            Source::Publication => "publication",
        }
    }
}

/// A date and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dated {
    pub day: Day,
    pub source: Source,
}

/// What the text says of its version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VersionDates {
    /// Every heading note, in the order written.
    pub notes: Vec<Note>,
    /// The version's own date: when this text was adopted, amended, revised or promulgated.
    pub promulgated: Option<Dated>,
    pub effective_from: Option<Dated>,
    /// Only ever given with the upload: the text says when a version starts, and the next version
    /// (or a repeal) when it ends.
    pub effective_to: Option<Dated>,
    /// Where sources disagreed: which one won, and why.
    pub decisions: Vec<String>,
}

/// Reads the heading notes (`preamble`: the text between the title and the first chapter or
/// article), the effect article (the last "自…起施行" in `body`) and the file name's date.
pub fn version_dates<'a>(
    preamble: &str,
    body: impl IntoIterator<Item = &'a str>,
    file_name: &str,
) -> VersionDates {
    let notes = heading_notes(preamble);
    let mut out = VersionDates {
        notes,
        ..VersionDates::default()
    };
    let last_note = out
        .notes
        .iter()
        .filter(|n| n.act != Act::TakesEffect)
        .max_by_key(|n| n.day)
        .cloned();
    out.promulgated = last_note.as_ref().map(|n| Dated {
        day: n.day,
        source: Source::HeadingNote,
    });
    if let Some(named) = file_name_day(file_name) {
        match out.promulgated {
            Some(p) if p.day >= named => {}
            Some(p) => {
                out.decisions.push(format!(
                    "the heading notes end at {}; the file is named after {named}, a later \
                     version: its date is taken",
                    p.day
                ));
                out.promulgated = Some(Dated {
                    day: named,
                    source: Source::FileName,
                });
            }
            None => {
                out.promulgated = Some(Dated {
                    day: named,
                    source: Source::FileName,
                })
            }
        }
    }
    out.effective_from = effective_from(&mut out, body);
    out
}

/// [`version_dates`] over a document's semantic blocks as (block type, text), in order: the
/// heading notes are the blocks before the first article.
pub fn from_blocks<'a>(
    blocks: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
    file_name: &str,
) -> VersionDates {
    let preamble: Vec<&str> = blocks
        .clone()
        .into_iter()
        .take_while(|(kind, _)| *kind != "article")
        .map(|(_, text)| text)
        .collect();
    version_dates(
        &preamble.join("\n"),
        blocks.into_iter().map(|(_, text)| text),
        file_name,
    )
}

fn effective_from<'a>(
    out: &mut VersionDates,
    body: impl IntoIterator<Item = &'a str>,
) -> Option<Dated> {
    let effect_note = out
        .notes
        .iter()
        .rev()
        .find(|n| n.act == Act::TakesEffect)
        .map(|n| n.day);
    let mut article: Option<Effect> = None;
    for text in body {
        if let Some(e) = last_effect_clause(text) {
            article = Some(e);
        }
    }
    let published = out.promulgated;
    if let Some(day) = effect_note {
        if let Some(Effect::On(a)) = article.filter(|a| *a != Effect::On(day)) {
            out.decisions.push(format!(
                "a heading note says it takes effect on {day}, the effect article {a}: the \
                 note, written for this version, is taken"
            ));
        }
        return Some(Dated {
            day,
            source: Source::HeadingNote,
        });
    }
    match (article, published) {
        (Some(Effect::On(a)), Some(p)) if a >= p.day => Some(Dated {
            day: a,
            source: Source::EffectArticle,
        }),
        (Some(Effect::On(a)), None) => Some(Dated {
            day: a,
            source: Source::EffectArticle,
        }),
        (Some(Effect::On(a)), Some(p)) => {
            out.decisions.push(format!(
                "the effect article names {a}, before this version's date {}: it is the \
                 original text's, kept through an amendment, which takes effect when published",
                p.day
            ));
            Some(Dated {
                day: p.day,
                source: Source::Publication,
            })
        }
        (Some(Effect::OnPublication), Some(p)) => {
            // The article speaks for this version only if nothing amended it since.
            let amended = p.source == Source::FileName
                || out
                    .notes
                    .iter()
                    .filter(|n| n.act != Act::TakesEffect)
                    .max_by_key(|n| n.day)
                    .is_some_and(|n| matches!(n.act, Act::Amended | Act::Revised));
            Some(Dated {
                day: p.day,
                source: if amended {
                    Source::Publication
                } else {
                    Source::EffectArticle
                },
            })
        }
        (None, Some(p)) => Some(Dated {
            day: p.day,
            source: Source::Publication,
        }),
        (_, None) => None,
    }
}

/// The dates an upload gives for its version, each optional. They beat what the text says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GivenDates {
    pub promulgated: Option<Day>,
    pub effective_from: Option<Day>,
    /// The last day before the version stops applying is the day before this one.
    pub effective_to: Option<Day>,
}

/// Why given dates cannot all be true: which two disagree, and how.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{later_field} {later} is {relation} {earlier_field} {earlier}: the dates contradict each other")]
pub struct Contradiction {
    pub earlier_field: &'static str,
    pub earlier: Day,
    pub later_field: &'static str,
    pub later: Day,
    relation: &'static str,
}

impl GivenDates {
    pub fn is_empty(&self) -> bool {
        self.promulgated.is_none() && self.effective_from.is_none() && self.effective_to.is_none()
    }

    /// A version takes effect no earlier than it is promulgated (the Legislation Law allows no
    /// retroactive statute), and stops applying after it took effect.
    pub fn check(&self) -> Result<(), Contradiction> {
        let pairs = [
            (
                "promulgated",
                self.promulgated,
                "effective_from",
                self.effective_from,
                false,
            ),
            (
                "promulgated",
                self.promulgated,
                "effective_to",
                self.effective_to,
                true,
            ),
            (
                "effective_from",
                self.effective_from,
                "effective_to",
                self.effective_to,
                true,
            ),
        ];
        for (earlier_field, earlier, later_field, later, strict) in pairs {
            let (Some(earlier), Some(later)) = (earlier, later) else {
                continue;
            };
            if later < earlier || (strict && later == earlier) {
                return Err(Contradiction {
                    earlier_field,
                    earlier,
                    later_field,
                    later,
                    relation: if later < earlier {
                        "before"
                    } else {
                        "the same day as"
                    },
                });
            }
        }
        Ok(())
    }
}

impl VersionDates {
    /// The upload's dates over the text's: each given date wins, and where the text said another,
    /// the decision says so. Checked dates only ([`GivenDates::check`]).
    pub fn with_given(mut self, given: &GivenDates) -> VersionDates {
        let mut take = |slot: &mut Option<Dated>, day: Option<Day>, what: &str| {
            let Some(day) = day else { return };
            if let Some(read) = slot.filter(|read| read.day != day) {
                self.decisions.push(format!(
                    "the upload gives {what} {day}, the text {} ({}): the upload's is taken",
                    read.day,
                    read.source.as_str()
                ));
            }
            *slot = Some(Dated {
                day,
                source: Source::Upload,
            });
        };
        take(&mut self.promulgated, given.promulgated, "promulgated");
        take(
            &mut self.effective_from,
            given.effective_from,
            "effective_from",
        );
        // A text that takes effect when published takes effect when the upload says it was; one
        // whose effect article is older than the given date is an amended text's original article.
        if let (Some(p), Some(e)) = (self.promulgated, self.effective_from) {
            let follows = e.source == Source::Publication && e.day != p.day;
            if follows || e.day < p.day {
                if e.day < p.day {
                    self.decisions.push(format!(
                        "the text takes effect on {} ({}), before the given date {}: it takes \
                         effect when published",
                        e.day,
                        e.source.as_str(),
                        p.day
                    ));
                }
                self.effective_from = Some(Dated {
                    day: p.day,
                    source: Source::Publication,
                });
            }
        }
        self.effective_to = given.effective_to.map(|day| Dated {
            day,
            source: Source::Upload,
        });
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    On(Day),
    /// 自公布之日起施行.
    OnPublication,
}

/// The last "自<date>起施行" or "自公布之日起施行" in `text`.
fn last_effect_clause(text: &str) -> Option<Effect> {
    let mut found = None;
    let mut rest = text;
    while let Some(at) = rest.find("起施行") {
        let before = &rest[..at];
        if let Some(from) = before.rfind('自') {
            let between = before[from + '自'.len_utf8()..].trim_matches([' ', '\u{3000}']);
            if between.starts_with("公布之日") || between.starts_with("发布之日") {
                found = Some(Effect::OnPublication);
            } else if let Some((day, used)) = leading_day(between) {
                if used == between.len() {
                    found = Some(Effect::On(day));
                }
            }
        }
        rest = &rest[at + "起施行".len()..];
    }
    found
}

/// The heading notes: each date, with the act the words after it name (a date whose words name
/// none, "2013年4月28日 最高人民法院…、2013年4月28日最高人民检察院…通过", takes the next one's).
fn heading_notes(preamble: &str) -> Vec<Note> {
    let joined: String = preamble.lines().map(str::trim).collect();
    let dates = dates_in(&joined);
    let mut notes = Vec::new();
    let mut waiting = Vec::new();
    for (i, &(day, _, end)) in dates.iter().enumerate() {
        let until = dates.get(i + 1).map_or(joined.len(), |d| d.1);
        let words = &joined[end..until];
        waiting.push(day);
        if let Some(act) = last_act(words) {
            notes.extend(waiting.drain(..).map(|day| Note { day, act }));
        }
    }
    notes
}

/// The last act word in `words`.
fn last_act(words: &str) -> Option<Act> {
    ACT_WORDS
        .iter()
        .filter_map(|w| words.rfind(w).map(|at| (at, *w)))
        .max_by_key(|(at, _)| *at)
        .and_then(|(_, w)| Act::from_word(w))
}

/// Every "YYYY年M月D日" in `text`: the day, and its byte range.
fn dates_in(text: &str) -> Vec<(Day, usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if let Some((day, used)) = leading_day(&text[i..]) {
            out.push((day, i, i + used));
            i += used;
        } else {
            i += text[i..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// The bytes of the spaces (ASCII or U+3000) that open `s`.
fn spaces_at(s: &str) -> usize {
    s.chars()
        .take_while(|c| *c == ' ' || *c == '\u{3000}')
        .map(char::len_utf8)
        .sum()
}

/// A date at the very start of `s` ("2024年7月1日", or "2024 年 7 月 1 日" as a PDF's text layer
/// spaces it; digits ASCII or full-width): the day and the bytes it used.
fn leading_day(s: &str) -> Option<(Day, usize)> {
    let mut parts = [0u32; 3];
    let mut at = 0;
    for (k, unit) in ['年', '月', '日'].into_iter().enumerate() {
        let digits: String = s[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || ('０'..='９').contains(c))
            .map(|c| match c {
                '０'..='９' => char::from(b'0' + (c as u32 - '０' as u32) as u8),
                _ => c,
            })
            .collect();
        let width: usize = s[at..]
            .chars()
            .take(digits.chars().count())
            .map(char::len_utf8)
            .sum();
        let limit = if k == 0 { 4 } else { 2 };
        if digits.is_empty() || digits.len() > limit || (k == 0 && digits.len() != 4) {
            return None;
        }
        at += width;
        // A PDF's text layer spaces the digits from their units: "2021 年 12 月 24 日".
        at += spaces_at(&s[at..]);
        if !s[at..].starts_with(unit) {
            return None;
        }
        at += unit.len_utf8();
        parts[k] = digits.parse().ok()?;
        if k < 2 {
            at += spaces_at(&s[at..]);
        }
    }
    Some((Day::new(parts[0], parts[1], parts[2])?, at))
}

/// The date a file is named after, as "(2019-03-24)" or "（2019-03-24）" before its extension.
fn file_name_day(name: &str) -> Option<Day> {
    let stem = crate::without_format_extension(name);
    let stem = stem.trim_end_matches([')', '）']);
    let start = stem.len().checked_sub(10)?;
    let candidate = stem.get(start..)?;
    let opened = stem[..start].ends_with(['(', '（']);
    opened.then(|| Day::parse_iso(candidate)).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(s: &str) -> Day {
        Day::parse_iso(s).unwrap()
    }

    #[test]
    fn an_amended_law_keeps_its_original_effect_article() {
        let preamble = "1993年7月2日 第八届全国人民代表大会常务委员会第二次会议通过\n\
             2012年8月31日 第十一届全国人民代表大会常务委员会第二十八次会议《关于修改\
             〈中华人民共和国农业技术推广法〉的决定》第一次修正";
        let body = [
            "第一条 为了加强农业技术推广工作……",
            "第三十九条 本法自1993年7月2日起施行。",
        ];
        let d = version_dates(preamble, body, "农业技术推广法.md");
        assert_eq!(d.notes.len(), 2);
        assert_eq!(d.notes[1].act, Act::Amended);
        assert_eq!(d.promulgated.unwrap().day, day("2012-08-31"));
        let effective = d.effective_from.unwrap();
        assert_eq!(
            (effective.day, effective.source),
            (day("2012-08-31"), Source::Publication)
        );
        assert!(d.decisions[0].contains("1993-07-02"), "{:?}", d.decisions);
    }

    #[test]
    fn a_revision_takes_effect_on_its_effect_article() {
        let preamble = "1988年9月5日 第七届全国人民代表大会常务委员会第三次会议通过\n\
             2024年2月27日 第十四届全国人民代表大会常务委员会第八次会议第二次修订）";
        let d = version_dates(preamble, ["第六十五条 本法自2024年5月1日起施行。"], "x.md");
        assert_eq!(d.promulgated.unwrap().day, day("2024-02-27"));
        let e = d.effective_from.unwrap();
        assert_eq!(
            (e.day, e.source),
            (day("2024-05-01"), Source::EffectArticle)
        );
        assert!(d.decisions.is_empty());
    }

    #[test]
    fn a_note_that_names_no_act_takes_the_next_ones_and_an_effect_note_wins() {
        let preamble = "2013年4月28日 最高人民法院审判委员会第1576次会议、2013年4月28日最高人民\
             检察院第十二届检察委员会第5次会议通过\n2013年5月2日 最高人民法院、最高人民检察院公告\
             公布\n2013年5月4日 施行";
        let d = version_dates(
            preamble,
            ["第二十二条 本解释自2013年5月4日起施行。"],
            "y.md",
        );
        let acts: Vec<Act> = d.notes.iter().map(|n| n.act).collect();
        assert_eq!(
            acts,
            [
                Act::Adopted,
                Act::Adopted,
                Act::Promulgated,
                Act::TakesEffect
            ]
        );
        assert_eq!(d.promulgated.unwrap().day, day("2013-05-02"));
        let e = d.effective_from.unwrap();
        assert_eq!((e.day, e.source), (day("2013-05-04"), Source::HeadingNote));
    }

    #[test]
    fn a_file_named_after_a_later_version_than_its_notes_gives_the_date() {
        let preamble =
            "2002年9月29日 中华人民共和国国务院令第363号公布\n2016年2月6日 《国务院关于修改\
             部分行政法规的决定》第二次修订";
        let d = version_dates(
            preamble,
            ["第三十八条 本条例自2002年11月15日起施行。"],
            "互联网上网服务营业场所管理条例(2019-03-24).md",
        );
        let p = d.promulgated.unwrap();
        assert_eq!((p.day, p.source), (day("2019-03-24"), Source::FileName));
        assert_eq!(d.effective_from.unwrap().day, day("2019-03-24"));
        assert_eq!(d.decisions.len(), 2, "{:?}", d.decisions);
    }

    #[test]
    fn given_dates_win_and_say_what_they_replaced() {
        let text = version_dates(
            "（2013年12月28日通过 2018年10月26日修正）",
            ["本法自2014年3月1日起施行。"],
            "x.md",
        );
        let given = GivenDates {
            effective_from: Some(day("2019-01-01")),
            ..GivenDates::default()
        };
        let out = text.clone().with_given(&given);
        assert_eq!(out.promulgated.unwrap().day, day("2018-10-26"));
        assert_eq!(out.promulgated.unwrap().source, Source::HeadingNote);
        let from = out.effective_from.unwrap();
        assert_eq!((from.day, from.source), (day("2019-01-01"), Source::Upload));
        assert!(out
            .decisions
            .last()
            .unwrap()
            .contains("upload gives effective_from 2019-01-01"));
        // A given version date moves a takes-effect-when-published date with it.
        let out = text.with_given(&GivenDates {
            promulgated: Some(day("2018-11-01")),
            ..GivenDates::default()
        });
        assert_eq!(out.effective_from.unwrap().day, day("2018-11-01"));
        assert_eq!(out.effective_from.unwrap().source, Source::Publication);
    }

    #[test]
    fn contradicting_dates_are_named() {
        let both = |p: &str, e: Option<&str>, t: Option<&str>| GivenDates {
            promulgated: Some(day(p)),
            effective_from: e.map(day),
            effective_to: t.map(day),
        };
        assert!(both("2020-01-01", Some("2020-01-01"), None).check().is_ok());
        let err = both("2020-05-01", Some("2020-01-01"), None)
            .check()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "effective_from 2020-01-01 is before promulgated 2020-05-01: the dates contradict each other"
        );
        let err = both("2020-01-01", Some("2020-02-01"), Some("2020-02-01"))
            .check()
            .unwrap_err();
        assert_eq!(
            (err.earlier_field, err.later_field),
            ("effective_from", "effective_to")
        );
        assert!(both("2020-01-01", None, Some("2019-01-01"))
            .check()
            .is_err());
    }

    #[test]
    fn a_pdfs_spaced_dates_are_read() {
        let out = version_dates(
            "2021 年 12 月 24 日 第十三届全国人民代表大会常务委员会第三十二次会议通过",
            ["第六十五条 本法自 2022 年 6 月 1 日起施行。"],
            "law.pdf",
        );
        assert_eq!(out.promulgated.unwrap().day, day("2021-12-24"));
        assert_eq!(out.effective_from.unwrap().day, day("2022-06-01"));
        assert_eq!(
            leading_day("2021 年 12 月 24 日 通过").unwrap().1,
            "2021 年 12 月 24 日".len()
        );
    }

    #[test]
    fn dates_are_read_strictly() {
        assert_eq!(
            leading_day("２０２４年７月１日起"),
            Some((day("2024-07-01"), 27))
        );
        assert_eq!(leading_day("2023年2月30日"), None);
        assert_eq!(leading_day("24年7月1日"), None);
        assert_eq!(
            last_effect_clause("本法自公布之日起施行。"),
            Some(Effect::OnPublication)
        );
        assert_eq!(last_effect_clause("自本法施行之日起"), None);
        assert_eq!(file_name_day("法(2019-03-24).md"), Some(day("2019-03-24")));
        assert_eq!(file_name_day("法2019-03-24.md"), None);
        assert_eq!(Day::parse_iso("2024-13-01"), None);
    }
}
