//! How a line's atoms chain into references: each form starts, extends or joins the one read.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::articles::Division;
use super::drafts::{flush, previous_articles, push, Draft, Found};
use super::forms::{atoms, touches, Atom, AtomKind};
use super::named_laws::law_on_the_left;
use super::targets::SP;
use super::targets::{ArticleNo, Target};

/// What may join two references of one list: they share the first one's law (and article).
static JOINER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r"^{SP}(?:、|，|,|和|及|以及|与|或者|或|至|到){SP}$"
    ))
    .expect("static regex")
});

/// Where a reference stands: the article, paragraph and division around it.
pub(super) struct Place {
    pub(super) article: ArticleNo,
    pub(super) paragraph: u32,
    pub(super) division: Division,
}

/// The references of one paragraph line, in order.
/// `cited` carries, from line to line of one paragraph, the last other article of this regulation
/// it cited (what a bare 第（一）项 after it means).
pub(super) fn read_line(
    text: &str,
    line: Range<usize>,
    place: &Place,
    cited: &mut Option<ArticleNo>,
) -> Vec<Found> {
    let slice = &text[line.clone()];
    let found = atoms(slice);
    let mut reader = LineReader {
        slice,
        atoms: &found,
        place,
        cited: *cited,
        draft: None,
        previous: None,
        out: Vec::new(),
    };
    for k in 0..found.len() {
        reader.read(k);
    }
    reader.finish(line, cited)
}

/// How an atom stands to the one before it, while a reference is being read.
#[derive(Clone, Copy, Default)]
struct Link {
    /// A list's joiner (、, 和, 至…) alone between them, with a reference being read.
    joined: bool,
    /// Nothing but spaces between them, with a reference being read.
    touching: bool,
    /// The joiner is 至 or 到: the two ends of a span.
    to: bool,
}

/// One line being read, atom by atom: the reference being read (the draft) and those done.
struct LineReader<'a> {
    slice: &'a str,
    atoms: &'a [Atom],
    place: &'a Place,
    /// The last other article of this regulation the paragraph cited before this line.
    cited: Option<ArticleNo>,
    draft: Option<Draft>,
    previous: Option<&'a Atom>,
    out: Vec<Found>,
}

impl<'a> LineReader<'a> {
    /// Reads the `k`th atom: it starts the next reference, extends or joins the draft, or ends it.
    fn read(&mut self, k: usize) {
        let atoms = self.atoms;
        let atom = &atoms[k];
        let next = atoms.get(k + 1);
        let link = self.link(atom);
        match atom.kind {
            AtomKind::Numbered(division) => self.numbered_division(atom, division, link),
            AtomKind::Own | AtomKind::Title => {
                // A law by itself is no reference; it waits for an article touching it.
                self.flush();
            }
            AtomKind::Article(n) => self.article(atom, n, link),
            AtomKind::Paragraph(p) => self.paragraph(atom, p, link),
            AtomKind::Item(i) => self.item(atom, i, link),
            AtomKind::ThisArticle => self.this_article(atom, next),
            AtomKind::PreviousParagraphs(back) => self.paragraphs_before(atom, back),
            AtomKind::PreviousArticles(back) => self.articles_before(atom, back),
            AtomKind::Chapter | AtomKind::Section | AtomKind::Part => self.own_division(atom, next),
        }
        self.previous = Some(atom);
    }

    /// Read before the atom changes the draft: how it stands to the atom before it.
    fn link(&self, atom: &Atom) -> Link {
        let Some(p) = self.previous else {
            return Link::default();
        };
        let between = &self.slice[p.range.end..atom.range.start];
        let reading = self.draft.is_some();
        let joiner = between.trim_matches([' ', '\u{3000}']);
        Link {
            joined: reading && JOINER.is_match(between),
            touching: reading && touches(self.slice, p, atom),
            to: joiner == "至" || joiner == "到",
        }
    }

    /// The draft, if any, is done.
    fn flush(&mut self) {
        flush(&mut self.draft, &mut self.out);
    }

    /// 本条例第二章, 本法第一编、第五编: only with the regulation named (a bare 第二章 in running
    /// text is too often a heading quoted).
    fn numbered_division(&mut self, atom: &Atom, division: Division, link: Link) {
        let after_own = self
            .previous
            .is_some_and(|p| p.kind == AtomKind::Own && touches(self.slice, p, atom));
        let in_list = link.joined
            && self
                .draft
                .as_ref()
                .is_some_and(|d| matches!(d.fixed, Some(Target::Division { .. })));
        self.flush();
        if !(after_own || in_list) {
            return;
        }
        let start = match self.previous {
            Some(p) if after_own => p.range.start,
            _ => atom.range.start,
        };
        self.draft = Some(Draft {
            fixed: Some(Target::Division {
                part: division.part,
                chapter: division.chapter,
                section: division.section,
            }),
            ..Draft::spanning(start, atom.range.end)
        });
    }

    fn article(&mut self, atom: &Atom, n: ArticleNo, link: Link) {
        // A reference opening a line is the article's own heading only when it is this article.
        if atom.range.start == 0 && n == self.place.article {
            // The article's own heading (第三十九条　…), not a reference.
            return;
        }
        let law_left = self
            .previous
            .filter(|p| touches(self.slice, p, atom))
            .map(|p| matches!(p.kind, AtomKind::Own | AtomKind::Title))
            .unwrap_or(false);
        if link.joined && !law_left {
            self.article_in_list(atom, n, link);
        } else {
            self.flush();
            self.open_article(atom, n);
        }
    }

    /// 第X条至第Y条 widens the draft to a span; 第X条、第Y条 ends it and opens the next member of
    /// its list, with the list's law and start.
    fn article_in_list(&mut self, atom: &Atom, n: ArticleNo, link: Link) {
        let mut d = self.draft.take().expect("joined to a draft");
        if link.to && d.fixed.is_none() && d.article.is_some() && d.paragraph.is_none() {
            d.span_from = d.article;
            d.article = Some(n);
            d.end = atom.range.end;
            self.draft = Some(d);
            return;
        }
        push(&d, &mut self.out);
        self.draft = Some(Draft {
            group: d.group_start(),
            law: d.law,
            article: Some(n),
            ..Draft::spanning(atom.range.start, atom.range.end)
        });
    }

    /// An article that begins a reference, with the law touching it on its left: 本法 (this
    /// regulation), 《…》, a law named without marks, or none (this regulation).
    fn open_article(&mut self, atom: &Atom, n: ArticleNo) {
        let (start, law) = match self.previous.filter(|p| touches(self.slice, p, atom)) {
            Some(p) if p.kind == AtomKind::Own => (p.range.start, None),
            Some(p) if p.kind == AtomKind::Title => (p.range.start, p.name.clone()),
            _ => {
                let law = law_on_the_left(self.slice, atom.range.start, None);
                let start = match &law {
                    Some(name) => atom.range.start - name.len(),
                    None => atom.range.start,
                };
                (start, law)
            }
        };
        self.draft = Some(Draft {
            law,
            article: Some(n),
            ..Draft::spanning(start, atom.range.end)
        });
    }

    fn paragraph(&mut self, atom: &Atom, p: u32, link: Link) {
        let extends = link.touching
            && self.draft.as_ref().is_some_and(|d| {
                d.paragraph.is_none()
                    && d.item.is_none()
                    && d.span_from.is_none()
                    && d.one_article().is_some()
            });
        if extends {
            let d = self.draft.as_mut().expect("touching a draft");
            d.article = d.one_article();
            d.fixed = None;
            d.paragraph = Some(p);
            d.more = atom.more.clone();
            d.end = atom.range.end;
        } else if link.joined && self.draft.as_ref().is_some_and(|d| d.paragraph.is_some()) {
            let d = self.draft.take().expect("joined");
            push(&d, &mut self.out);
            self.draft = Some(Draft {
                start: atom.range.start,
                paragraph: Some(p),
                item: None,
                more: atom.more.clone(),
                end: atom.range.end,
                ..d
            });
        } else {
            self.flush();
            // A bare 第二款: this article's.
            self.draft = Some(Draft {
                article: Some(self.place.article),
                paragraph: Some(p),
                more: atom.more.clone(),
                ..Draft::spanning(atom.range.start, atom.range.end)
            });
        }
    }

    fn item(&mut self, atom: &Atom, i: u32, link: Link) {
        if link.touching
            && self
                .draft
                .as_ref()
                .is_some_and(|d| d.item.is_none() && d.span_from.is_none())
        {
            let d = self.draft.as_mut().expect("touching a draft");
            d.item = Some(i);
            d.more = atom.more.clone();
            d.end = atom.range.end;
        } else if link.joined
            && link.to
            && self
                .draft
                .as_ref()
                .is_some_and(|d| d.item.is_some() && d.more.is_empty() && d.item_from.is_none())
        {
            // 第四项至第六项
            let d = self.draft.as_mut().expect("joined");
            d.item_from = d.item;
            d.item = Some(i);
            d.end = atom.range.end;
        } else if link.joined && self.draft.as_ref().is_some_and(|d| d.item.is_some()) {
            let d = self.draft.take().expect("joined");
            push(&d, &mut self.out);
            self.draft = Some(Draft {
                start: atom.range.start,
                item: Some(i),
                item_from: None,
                group: usize::MAX,
                more: atom.more.clone(),
                end: atom.range.end,
                ..d
            });
        } else {
            self.flush();
            self.bare_item(atom, i);
        }
    }

    /// A bare 第（一）项: an item of the article this paragraph cited last (违反本条例第十八条规定
    /// 的…：（一）违反第（一）项…), else of this paragraph.
    fn bare_item(&mut self, atom: &Atom, i: u32) {
        let (article, paragraph) = match self.cited {
            Some(a) => (a, None),
            None => (self.place.article, Some(self.place.paragraph)),
        };
        self.draft = Some(Draft {
            article: Some(article),
            paragraph,
            item: Some(i),
            more: atom.more.clone(),
            ..Draft::spanning(atom.range.start, atom.range.end)
        });
    }

    /// 本条 alone names the article it stands in: no reference unless a 款 or 项 follows.
    fn this_article(&mut self, atom: &Atom, next: Option<&Atom>) {
        self.flush();
        let followed = next.is_some_and(|n| {
            matches!(n.kind, AtomKind::Paragraph(_) | AtomKind::Item(_))
                && touches(self.slice, atom, n)
        });
        self.draft = followed.then(|| Draft {
            article: Some(self.place.article),
            ..Draft::spanning(atom.range.start, atom.range.end)
        });
    }

    /// 前款, 前两款: the paragraphs just before this one.
    fn paragraphs_before(&mut self, atom: &Atom, back: u32) {
        self.flush();
        let place = self.place;
        let (from, to) = (
            place.paragraph as i64 - back as i64,
            place.paragraph as i64 - 1,
        );
        self.draft = Some(Draft {
            article: Some(place.article),
            fixed: Some(Target::Paragraphs {
                article: place.article,
                from: from.max(0) as u32,
                to: to.max(0) as u32,
            }),
            ..Draft::spanning(atom.range.start, atom.range.end)
        });
    }

    /// 前条, 前两条: the articles just before this one.
    fn articles_before(&mut self, atom: &Atom, back: u32) {
        self.flush();
        let (from, to) = previous_articles(self.place.article, back);
        self.draft = Some(Draft {
            fixed: Some(Target::Articles { from, to }),
            ..Draft::spanning(atom.range.start, atom.range.end)
        });
    }

    /// 本章, 本节, 本编: the division that holds this article.
    fn own_division(&mut self, atom: &Atom, next: Option<&Atom>) {
        self.flush();
        // 本章第…条 is an article of this regulation; the division only qualifies it.
        if next
            .is_some_and(|n| matches!(n.kind, AtomKind::Article(_)) && touches(self.slice, atom, n))
        {
            return;
        }
        self.draft = Some(Draft {
            fixed: Some(holding_division(atom.kind, self.place.division)),
            ..Draft::spanning(atom.range.start, atom.range.end)
        });
    }

    /// The line's references, placed in the block's text; `cited` learns the last other article
    /// of this regulation the line names.
    fn finish(mut self, line: Range<usize>, cited: &mut Option<ArticleNo>) -> Vec<Found> {
        self.flush();
        for (_, law, target, _) in &self.out {
            if let (None, Target::Article { article, .. } | Target::Articles { to: article, .. }) =
                (law, target)
            {
                if *article != self.place.article {
                    *cited = Some(*article);
                }
            }
        }
        self.out
            .into_iter()
            .map(|(r, law, t, g)| {
                (
                    r.start + line.start..r.end + line.start,
                    law,
                    t,
                    g + line.start,
                )
            })
            .collect()
    }
}

/// The division 本编, 本章 or 本节 names, from the one that holds the citing article: a level the
/// text does not number is 0.
fn holding_division(kind: AtomKind, d: Division) -> Target {
    match kind {
        AtomKind::Part => Target::Division {
            part: d.part.or(Some(0)),
            chapter: None,
            section: None,
        },
        AtomKind::Chapter => Target::Division {
            part: d.part,
            chapter: d.chapter.or(Some(0)),
            section: None,
        },
        _ => Target::Division {
            part: d.part,
            chapter: d.chapter,
            section: d.section.or(Some(0)),
        },
    }
}
