//! The loader never panics, whatever bytes it is given: a few hundred
//! mutations of the example files (and of the bad fixtures), from single
//! flipped bytes to spliced lines and TOML-significant tokens. Deterministic:
//! a fixed-seed generator, so a failure reproduces.

use std::path::Path;

/// splitmix64: tiny, good enough to pick mutations, and no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const TOKENS: &[&str] = &[
    "[[",
    "]]",
    "[",
    "]",
    "=",
    "\"",
    "'",
    "{",
    "}",
    ",",
    ".",
    "\n",
    "#",
    "0x",
    "-",
    "+",
    "1e999",
    "nan",
    "inf",
    "-0",
    "é",
    "\u{0}",
    "%",
    "/",
    "\\",
    "\"\"\"",
    "9999999999999999999999",
    "[[link]]",
    "[[node]]",
    "[link.a_to_b]",
    "a_to_b",
    "unlimited",
    "none",
    "auto",
    "\"0s\"",
    "\"1%\"",
    "\"198.18.0.1/24\"",
    "true",
    "{ model = \"x\" }",
    "1979-05-27T07:32:00Z",
    "\u{feff}",
    "\r\n",
];

fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(7) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            1 => {
                let end = (at + rng.below(40)).min(b.len());
                b.drain(at..end);
            }
            2 => {
                let end = (at + rng.below(60)).min(b.len());
                let chunk = b[at..end].to_vec();
                let to = rng.below(b.len() + 1);
                b.splice(to..to, chunk);
            }
            3 => {
                let tok = TOKENS[rng.below(TOKENS.len())].as_bytes();
                b.splice(at..at, tok.iter().copied());
            }
            4 => b.truncate(at),
            5 if !other.is_empty() => {
                // A line from another file.
                let start = rng.below(other.len());
                let end = other[start..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(other.len(), |p| start + p + 1);
                b.splice(at..at, other[start..end].iter().copied());
            }
            _ => {
                // Swap two lines' worth of bytes: keeps the file plausible.
                let n = rng.below(30);
                let a = rng.below(b.len().saturating_sub(n) + 1);
                let c = rng.below(b.len().saturating_sub(n) + 1);
                for k in 0..n {
                    if a + k < b.len() && c + k < b.len() {
                        b.swap(a + k, c + k);
                    }
                }
            }
        }
    }
    b
}

fn corpus() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [root.join("../../examples"), root.join("tests/bad")] {
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        files.extend(
            paths
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .map(|p| std::fs::read(p).unwrap()),
        );
    }
    assert!(files.len() >= 10);
    files
}

#[test]
fn mutated_files_never_panic() {
    let files = corpus();
    let mut rng = Rng(0x006e_6574_6c6f_6f70);
    // NETLOOP_FUZZ_ITERS runs a longer campaign by hand; CI runs 600.
    let iters: usize = std::env::var("NETLOOP_FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let (mut loaded, mut failed) = (0, 0);
    for i in 0..iters {
        let input = &files[i % files.len()];
        let other = &files[rng.below(files.len())];
        let bytes = mutate(&mut rng, input, other);
        let result = std::panic::catch_unwind(|| netloop_config::parse_bytes(&bytes, "fuzz.toml"));
        match result {
            Ok(Ok(_)) => loaded += 1,
            Ok(Err(errors)) => {
                failed += 1;
                // Every error is positioned inside the input.
                let lines = bytes.split(|&c| c == b'\n').count();
                for e in errors.iter() {
                    assert!(
                        e.line >= 1 && e.line <= lines && e.column >= 1,
                        "{e} in\n{}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
            }
            Err(_) => panic!("panicked on input:\n{}", String::from_utf8_lossy(&bytes)),
        }
    }
    // The mutations must actually exercise the error paths.
    assert!(
        failed > iters / 2,
        "only {failed} of {iters} mutations failed to load"
    );
    assert_eq!(loaded + failed, iters);
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(42);
    for _ in 0..200 {
        let len = rng.below(200);
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                // Mostly printable TOML-ish characters, some anything.
                const ALPHABET: &[u8] = b"[]{}=\"'.,#\n abcdefghkmnoprstuvwxyz0123456789_-+%/:";
                if rng.below(10) == 0 {
                    rng.next() as u8
                } else {
                    ALPHABET[rng.below(ALPHABET.len())]
                }
            })
            .collect();
        let r = std::panic::catch_unwind(|| netloop_config::parse_bytes(&bytes, "random.toml"));
        assert!(
            r.is_ok(),
            "panicked on {:?}",
            String::from_utf8_lossy(&bytes)
        );
    }
}
