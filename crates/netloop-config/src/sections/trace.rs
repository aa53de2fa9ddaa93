//! A link direction's `trace`: its capacity from a Mahimahi trace or a
//! series of rates instead of a fixed `rate` (semantics in
//! `netloop_model::trace`).
//!
//! ```toml
//! trace = "cell.down"                                 # Mahimahi's format
//! trace = { mahimahi = "cell.down" }                  # the same
//! trace = { rates = "rates.txt" }                     # "TIME RATE" lines
//! trace = { rates = [["0s", "10Mbps"], ["2s", "1Mbps"]] }
//! ```
//!
//! A file is found relative to the topology file's directory. Its errors
//! name the file and the line, as Mahimahi would refuse it: Mahimahi's rules
//! for its own format (whole milliseconds, one a line, non-decreasing, the
//! last above zero), so that a trace netloop takes is one `mm-link` takes.

use std::path::{Path, PathBuf};

use netloop_core::{DataRate, SimDuration};
use netloop_model::trace::TraceSpec;
use toml::de::DeValue;

use crate::reader::{Diag, Table};
use crate::value;

const KEYS: &[&str] = &["mahimahi", "rates"];

/// Largest trace file read (a day of a busy cellular trace is a few MB).
const MAX_FILE: u64 = 256 << 20;

/// Reads `trace` in `t`, if given; errors are reported and it is left out.
pub(crate) fn read(t: &mut Table<'_, '_>, d: &mut Diag<'_>) -> Option<TraceSpec> {
    let v = t.get("trace")?;
    let base = base_dir(&d.file);
    let DeValue::Table(table) = v.get_ref() else {
        return t.opt(d, "trace", |v| match v.get_ref() {
            DeValue::String(path) => mahimahi_file(&base, path),
            other => value::expected(
                "a Mahimahi trace file, or a table like { rates = \"rates.txt\" }",
                other,
            ),
        });
    };
    let mut tt = t.child("trace", table, v.span());
    tt.check_keys(d, KEYS, |_| None);
    let given: Vec<&str> = KEYS.iter().copied().filter(|k| tt.has(k)).collect();
    let mut wrong = None;
    let spec = match given.as_slice() {
        ["mahimahi"] => tt.opt(d, "mahimahi", |v| match v.get_ref() {
            DeValue::String(path) => mahimahi_file(&base, path),
            other => value::expected("a Mahimahi trace file", other),
        }),
        ["rates"] => tt.opt(d, "rates", |v| match v.get_ref() {
            DeValue::String(path) => rates_file(&base, path),
            DeValue::Array(items) => rates_inline(items),
            other => value::expected(
                "a file of \"TIME RATE\" lines, or an array like [[\"0s\", \"10Mbps\"], [\"2s\", \"1Mbps\"]]",
                other,
            ),
        }),
        [] => {
            wrong = Some("a trace table gives `mahimahi = \"FILE\"` or `rates = \"FILE\"` (or an array of [time, rate])");
            None
        }
        _ => {
            wrong = Some("a trace is `mahimahi` or `rates`, not both");
            None
        }
    };
    t.failed |= tt.failed;
    if let Some(message) = wrong {
        t.error(d, "trace", message);
    }
    spec
}

/// The directory a trace file is found from: the topology file's.
fn base_dir(topology: &str) -> PathBuf {
    Path::new(topology)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn read_file(base: &Path, path: &str) -> Result<String, String> {
    use std::io::Read;
    let full = base.join(path);
    let shown = full.display();
    let meta = std::fs::metadata(&full).map_err(|e| format!("{shown}: {e}"))?;
    // Not a device or a pipe: /dev/zero has no end, a FIFO may never
    // send one.
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    let mut text = String::new();
    std::fs::File::open(&full)
        .and_then(|f| f.take(MAX_FILE + 1).read_to_string(&mut text))
        .map_err(|e| format!("{shown}: {e}"))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!(
            "{shown}: more than {MAX_FILE} bytes, more than a trace netloop reads"
        ));
    }
    Ok(text)
}

fn mahimahi_file(base: &Path, path: &str) -> Result<TraceSpec, String> {
    let text = read_file(base, path)?;
    let ms = parse_mahimahi(&text).map_err(|e| format!("{path}: {e}"))?;
    Ok(TraceSpec::Mahimahi {
        source: path.to_string(),
        ms,
    })
}

fn rates_file(base: &Path, path: &str) -> Result<TraceSpec, String> {
    let text = read_file(base, path)?;
    let steps = parse_rates(&text).map_err(|e| format!("{path}: {e}"))?;
    Ok(TraceSpec::Rates {
        source: path.to_string(),
        steps,
    })
}

/// Mahimahi's format: one whole number of milliseconds a line.
pub(crate) fn parse_mahimahi(text: &str) -> Result<Vec<u64>, String> {
    let mut ms: Vec<u64> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let s = line.trim_end_matches('\r').trim();
        if s.is_empty() {
            return Err(format!(
                "line {n}: empty (Mahimahi takes one timestamp a line)"
            ));
        }
        let v: u64 = s
            .parse()
            .map_err(|_| format!("line {n}: {s:?} is not a timestamp in whole milliseconds"))?;
        if let Some(&last) = ms.last() {
            if v < last {
                return Err(format!(
                    "line {n}: {v} ms is before the line above ({last} ms): timestamps must not decrease"
                ));
            }
        }
        ms.push(v);
    }
    match ms.last() {
        None => Err("no timestamps".into()),
        Some(0) => {
            Err("the trace must last longer than 0 ms (its last timestamp is its period)".into())
        }
        Some(_) => Ok(ms),
    }
}

/// A rate series: `TIME RATE` a line (blank lines and `#` comments
/// allowed), TIME a duration (`2.5s`) or seconds, RATE a rate (`10Mbps`) or
/// bit/s.
pub(crate) fn parse_rates(text: &str) -> Result<Vec<(SimDuration, DataRate)>, String> {
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let s = line.split('#').next().unwrap_or("").trim();
        if s.is_empty() {
            continue;
        }
        let fields: Vec<&str> = s
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|f| !f.is_empty())
            .collect();
        let [time, rate] = fields.as_slice() else {
            return Err(format!(
                "line {n}: expected TIME RATE (like `2.5s 10Mbps`), found {s:?}"
            ));
        };
        let at = time_of(time).map_err(|e| format!("line {n}: {e}"))?;
        let r = rate_of(rate).map_err(|e| format!("line {n}: {e}"))?;
        steps.push((at, r));
    }
    check_steps(&steps)?;
    Ok(steps)
}

fn rates_inline(items: &toml::de::DeArray<'_>) -> Result<TraceSpec, String> {
    let mut steps = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let DeValue::Array(pair) = item.get_ref() else {
            return Err(format!(
                "element {i}: expected [time, rate] like [\"2s\", \"1Mbps\"]"
            ));
        };
        let pair: Vec<_> = pair.iter().collect();
        let [time, rate] = pair.as_slice() else {
            return Err(format!(
                "element {i}: expected [time, rate], found {} values",
                pair.len()
            ));
        };
        // Strings, read as in a file: a time in seconds or with a unit, a
        // rate in bit/s or with a unit.
        let text = |v: &DeValue<'_>| match v {
            DeValue::String(s) => Ok(s.to_string()),
            other => Err(format!(
                "element {i}: expected [time, rate] like [\"2s\", \"1Mbps\"], found {}",
                value::describe(other)
            )),
        };
        let at = time_of(&text(time.get_ref())?).map_err(|e| format!("element {i}: {e}"))?;
        let r = rate_of(&text(rate.get_ref())?).map_err(|e| format!("element {i}: {e}"))?;
        steps.push((at, r));
    }
    check_steps(&steps)?;
    Ok(TraceSpec::Rates {
        source: "inline".into(),
        steps,
    })
}

fn time_of(s: &str) -> Result<SimDuration, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(SimDuration::from_nanos((secs * 1e9).round() as u64));
        }
        return Err(format!("{s:?} is not a time (seconds, or like 2.5s)"));
    }
    SimDuration::parse(s).map_err(|e| format!("{s:?}: {e}"))
}

fn rate_of(s: &str) -> Result<DataRate, String> {
    if let Ok(bps) = s.parse::<u64>() {
        return Ok(DataRate::from_bps(bps));
    }
    DataRate::parse(s).map_err(|e| format!("{s:?}: {e}"))
}

fn check_steps(steps: &[(SimDuration, DataRate)]) -> Result<(), String> {
    TraceSpec::Rates {
        source: String::new(),
        steps: steps.to_vec(),
    }
    .check()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mahimahis_rules() {
        assert_eq!(parse_mahimahi("1\n1\n3\r\n").unwrap(), vec![1, 1, 3]);
        assert!(parse_mahimahi("1\n\n3\n")
            .unwrap_err()
            .contains("line 2: empty"));
        assert!(parse_mahimahi("1\n2.5\n").unwrap_err().contains("line 2"));
        assert!(parse_mahimahi("3\n2\n")
            .unwrap_err()
            .contains("must not decrease"));
        assert!(parse_mahimahi("0\n0\n")
            .unwrap_err()
            .contains("longer than 0 ms"));
        assert!(parse_mahimahi("").unwrap_err().contains("no timestamps"));
    }

    #[test]
    fn only_regular_files_are_read() {
        let e = read_file(Path::new("/"), "dev/zero").unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let e = read_file(Path::new("/"), "no/such/trace").unwrap_err();
        assert!(e.contains("no/such/trace"), "{e}");
    }

    #[test]
    fn rate_series_lines() {
        let s = parse_rates("# time rate\n0 10Mbps\n2.5s, 1000000\n\n3s 0   # outage\n4 2Mbps\n")
            .unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(
            s[1],
            (
                SimDuration::from_millis(2500),
                DataRate::from_bps(1_000_000)
            )
        );
        assert!(parse_rates("1s 1Mbps\n").unwrap_err().contains("not at 0"));
        assert!(parse_rates("0 1Mbps\n0 2Mbps\n")
            .unwrap_err()
            .contains("ascend"));
        assert!(parse_rates("0 1Mbps\n1 0\n")
            .unwrap_err()
            .contains("for ever"));
        assert!(parse_rates("0 fast\n").unwrap_err().contains("line 1"));
        assert!(parse_rates("0\n").unwrap_err().contains("TIME RATE"));
    }
}
