//! Which known law names a query may end with, without hashing every name for every query.

use std::collections::HashMap;

/// A bit per (byte length, last [`KEY_BYTES`] bytes) of every suffix of every candidate, hashed
/// into a fixed table: a name can be a suffix of a candidate only if its bit is set. A name costs
/// three loads, a few multiplies and a bit test, and only the names that pass go into a `HashMap`
/// (one of all 10,000 names, built per query, alone takes about a millisecond). False positives
/// are harmless (the index checks the exact text), false negatives impossible.
struct SuffixFilter {
    bits: Vec<u64>,
}

/// 2^17 bits, 16 KiB: a few thousand suffixes set leave false positives at a few per cent.
const FILTER_BITS: u32 = 17;

/// How many trailing bytes of a suffix [`SuffixFilter`] looks at: eight CJK characters, more than
/// the endings names share ("若干问题的解释" is seven).
const KEY_BYTES: usize = 24;

fn load(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
}

/// A hash of the length of `s` and its last [`KEY_BYTES`] bytes.
fn suffix_key(s: &[u8]) -> usize {
    let t = &s[s.len().saturating_sub(KEY_BYTES)..];
    let n = t.len();
    let (a, b, c) = if n >= 8 {
        // Three loads, overlapping when shorter than 24 bytes, cover the whole tail.
        (load(t, 0), load(t, n / 2 - 4), load(t, n - 8))
    } else {
        (t.iter().fold(0, |w, b| (w << 8) | u64::from(*b)), 0, 0)
    };
    let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(29);
    let h = mix(
        mix(
            mix((s.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15), a),
            b,
        ),
        c,
    );
    (h.wrapping_mul(0xc4ce_b9fe_1a85_ec53) >> (64 - FILTER_BITS)) as usize
}

impl SuffixFilter {
    fn new<'c>(candidates: impl Iterator<Item = &'c str>, max_len: usize) -> Self {
        let mut bits = vec![0u64; (1 << FILTER_BITS) / 64];
        for c in candidates {
            for (i, _) in c.char_indices().rev() {
                if c.len() - i > max_len {
                    break;
                }
                let k = suffix_key(&c.as_bytes()[i..]);
                bits[k / 64] |= 1 << (k % 64);
            }
        }
        SuffixFilter { bits }
    }

    fn may_end_a_candidate(&self, name: &str) -> bool {
        let k = suffix_key(name.as_bytes());
        self.bits[k / 64] & (1 << (k % 64)) != 0
    }
}

/// The known names that may end one of the query's candidates, by name.
pub(super) struct NameIndex<'k> {
    by_name: HashMap<&'k str, usize>,
    /// The distinct byte lengths of those names, longest first.
    lengths: Vec<usize>,
}

impl<'k> NameIndex<'k> {
    pub(super) fn new<'c>(known: &'k [String], candidates: impl Iterator<Item = &'c str>) -> Self {
        let max_len = known.iter().map(String::len).max().unwrap_or(0);
        let filter = SuffixFilter::new(candidates, max_len);
        let mut by_name = HashMap::new();
        let mut lengths = Vec::new();
        for (i, name) in known.iter().enumerate() {
            // An empty name would match everything.
            if !name.is_empty() && filter.may_end_a_candidate(name) {
                by_name.entry(name.as_str()).or_insert_with(|| {
                    lengths.push(name.len());
                    i
                });
            }
        }
        lengths.sort_unstable_by(|a, b| b.cmp(a));
        lengths.dedup();
        NameIndex { by_name, lengths }
    }

    /// The longest known name `text` ends with.
    pub(super) fn longest_suffix(&self, text: &str) -> Option<usize> {
        self.lengths
            .iter()
            .filter(|&&len| len <= text.len() && text.is_char_boundary(text.len() - len))
            .find_map(|&len| self.by_name.get(&text[text.len() - len..]).copied())
    }
}
