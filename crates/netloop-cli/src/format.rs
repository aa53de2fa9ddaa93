//! Human-readable numbers for tables: rates, durations, counts.

/// `9.29 Mbit/s`.
pub fn rate(bps: f64) -> String {
    let (v, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbit/s")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbit/s")
    } else if bps >= 1e3 {
        (bps / 1e3, "kbit/s")
    } else {
        (bps, "bit/s")
    };
    format!("{v:.3} {unit}")
}

/// `20.004 ms`, `132.8 us`, `1.2 s`.
pub fn ns(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.3} s", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.3} ms", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} us", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

/// `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `0.98 %`.
pub fn percent(f: f64) -> String {
    format!("{:.2} %", f * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rate(941_500_000.0), "941.500 Mbit/s");
        assert_eq!(ns(20_004_000.0), "20.004 ms");
        assert_eq!(ns(132_800.0), "132.8 us");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(percent(0.0098), "0.98 %");
    }
}
