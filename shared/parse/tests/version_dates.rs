//! The dates docpipe reads from each version in `corpus/versions` against `INDEX.tsv`, which
//! gives each one's publication date and, where known, the date it took effect.

mod common;

use common::corpus;
use docpipe_parse::version_dates::{from_blocks, Day, Source};
use docpipe_parse::{parse, Hint, Limits};

struct Row {
    file: String,
    published: Day,
    valid_from: Option<Day>,
}

fn index() -> Vec<Row> {
    let text = std::fs::read_to_string(corpus().join("versions/INDEX.tsv"))
        .expect("corpus/versions/INDEX.tsv (set DOCPIPE_CORPUS)");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (file, published, valid_from) = (col("file"), col("published"), col("valid_from"));
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Row {
                file: f[file].to_string(),
                published: Day::parse_iso(f[published]).expect("a published date"),
                valid_from: f.get(valid_from).and_then(|v| Day::parse_iso(v)),
            }
        })
        .collect()
}

#[test]
fn every_version_in_the_corpus_gets_its_published_date_and_a_sourced_effective_date() {
    let rows = index();
    assert!(rows.len() >= 70, "{} rows", rows.len());
    let (mut effective_known, mut effective_right) = (0, 0);
    let mut wrong = Vec::new();
    for row in &rows {
        let bytes = std::fs::read(corpus().join("versions").join(&row.file)).unwrap();
        let doc = parse(
            &bytes,
            &Hint::new(row.file.as_str(), ""),
            &Limits::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", row.file));
        let blocks = doc
            .semantic_blocks
            .iter()
            .map(|b| (b.block_type.as_str(), b.text.as_str()));
        let dates = from_blocks(blocks, &row.file);
        let promulgated = dates.promulgated.expect("a version date");
        if promulgated.day != row.published {
            wrong.push(format!(
                "{}: published {} not {}",
                row.file, promulgated.day, row.published
            ));
        }
        let effective = dates.effective_from.expect("an effective date");
        if let Some(want) = row.valid_from {
            effective_known += 1;
            if effective.day == want {
                effective_right += 1;
            } else {
                // Only a date the text does not state may differ: one taken from publication,
                // because the amending decision that set it is not in the consolidated text.
                assert_eq!(
                    effective.source,
                    Source::Publication,
                    "{}: effective {} from {:?}, INDEX says {want}",
                    row.file,
                    effective.day,
                    effective.source
                );
            }
        }
        assert!(effective.day >= promulgated.day || effective.source == Source::HeadingNote);
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    // 24 of 28 when written: the other 4 took effect on a date only their amending decision says.
    assert!(
        effective_right * 100 >= effective_known * 80,
        "{effective_right} of {effective_known} effective dates"
    );
    println!(
        "{} versions: published dates all right; effective dates {effective_right} of {effective_known} known",
        rows.len()
    );
}
