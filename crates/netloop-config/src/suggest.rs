//! "Did you mean …?" for misspelt keys, kinds and names.
//!
//! A small edit distance (optimal string alignment: insertions, deletions,
//! substitutions and swaps of neighbours, so `dealy` is one edit from
//! `delay`) is enough for the short names of a topology file; it is not
//! worth a dependency.

/// The candidate closest to `word`, if it is close enough to be a plausible
/// typo: at most one edit for short words, up to three for long ones.
pub(crate) fn closest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    // Comparisons are case-insensitive so that `Router` finds `router`, and
    // '-' and '_' count as the same so that `a-to-b` finds `a_to_b`.
    let norm = |s: &str| -> Vec<char> {
        s.chars()
            .map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    };
    let w = norm(word);
    // Past this length nobody typed it by hand, and the distance is
    // quadratic: don't spend time on fuzzed input.
    if w.len() > 64 {
        return None;
    }
    let limit = (w.len() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (distance(&w, &norm(c)), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `"; did you mean 'x'?"` or nothing.
pub(crate) fn did_you_mean<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> String {
    closest(word, candidates)
        .map(|c| format!("; did you mean '{c}'?"))
        .unwrap_or_default()
}

/// Optimal-string-alignment distance between two words.
fn distance(a: &[char], b: &[char]) -> usize {
    let (n, m) = (a.len(), b.len());
    // Three rows suffice: the current one, the previous one (substitution,
    // insertion, deletion) and the one before (a swap of neighbours).
    let mut before: Vec<usize> = vec![0; m + 1];
    let mut prev: Vec<usize> = (0..=m).collect();
    let mut cur: Vec<usize> = vec![0; m + 1];
    for i in 1..=n {
        cur[0] = i;
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[m]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(a: &str, b: &str) -> usize {
        distance(
            &a.chars().collect::<Vec<_>>(),
            &b.chars().collect::<Vec<_>>(),
        )
    }

    #[test]
    fn distances() {
        assert_eq!(d("delay", "delay"), 0);
        assert_eq!(d("dealy", "delay"), 1);
        assert_eq!(d("dela", "delay"), 1);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        let keys = ["rate", "delay", "jitter", "endpoints"];
        assert_eq!(closest("dealy", keys), Some("delay"));
        assert_eq!(closest("endpoint", keys), Some("endpoints"));
        assert_eq!(closest("Rate", keys), Some("rate"));
        assert_eq!(closest("colour", keys), None);
        assert_eq!(closest("a-to-b", ["a_to_b", "b_to_a"]), Some("a_to_b"));
        assert_eq!(did_you_mean("x", keys), "");
    }
}
