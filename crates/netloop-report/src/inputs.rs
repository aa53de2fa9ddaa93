//! Finding and reading what a report shows: a results document and, if the
//! run was sampled, its time series.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// A run's results and series, and where they came from.
pub struct Inputs {
    /// The results document.
    pub results: Value,
    /// The results file.
    pub results_path: PathBuf,
    /// The time series, if there is one.
    pub series: Option<Series>,
}

/// A `netloop-series/1` file: its header and samples.
pub struct Series {
    /// The file.
    pub path: PathBuf,
    /// The first line.
    pub header: Value,
    /// Every sample, in order.
    pub samples: Vec<Value>,
    /// Whether the last line was cut short (a run killed while writing it).
    pub truncated: bool,
}

impl Series {
    /// Index of `name` in the header's array `key` (`links`, `flows`,
    /// `dir_columns`, `flow_columns`).
    pub fn index(&self, key: &str, name: &str) -> Option<usize> {
        self.header[key]
            .as_array()?
            .iter()
            .position(|v| v.as_str() == Some(name))
    }

    /// The header's array `key` as strings.
    pub fn names(&self, key: &str) -> Vec<String> {
        self.header[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Reads what `path` names: a results file, or a directory holding one
/// (with its series beside it, `<name>.series.jsonl`, or the directory's
/// only series file). Returns the inputs and where the page goes by
/// default (`<results name>.html` beside it).
pub fn load(path: &Path) -> Result<(Inputs, PathBuf)> {
    let results_path = if path.is_dir() {
        results_in(path)?
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&results_path)
        .with_context(|| format!("reading the results {}", results_path.display()))?;
    let results: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{}:{}:{}: not a results document: {e}",
            results_path.display(),
            e.line(),
            e.column()
        )
    })?;
    if !is_results(&results) {
        bail!(
            "{} is not a netloop results document (no `meta` and `links`): give the file \
             `netloop run --json` wrote",
            results_path.display()
        );
    }
    let stem = results_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "results".to_string());
    let dir = results_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let beside = dir.join(format!("{stem}.series.jsonl"));
    let series_path = if beside.is_file() {
        Some(beside)
    } else {
        only_series_in(&dir)?
    };
    let series = series_path.map(|p| read_series(&p)).transpose()?;
    let out = dir.join(format!("{stem}.html"));
    Ok((
        Inputs {
            results,
            results_path,
            series,
        },
        out,
    ))
}

fn is_results(v: &Value) -> bool {
    v.get("meta").is_some_and(Value::is_object) && v.get("links").is_some_and(Value::is_array)
}

/// The one results document in `dir` (`results.json` if there are several).
fn results_in(dir: &Path) -> Result<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = entry?.path();
        if p.extension().is_some_and(|e| e == "json") && p.is_file() {
            let is = std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| is_results(&v));
            if is {
                found.push(p);
            }
        }
    }
    found.sort();
    match found.len() {
        0 => bail!(
            "{} holds no netloop results (a .json file `netloop run --json` wrote)",
            dir.display()
        ),
        1 => Ok(found.remove(0)),
        _ => {
            if let Some(p) = found.iter().find(|p| p.ends_with("results.json")) {
                return Ok(p.clone());
            }
            let names: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
            bail!(
                "{} holds several results ({}): name the one to report on",
                dir.display(),
                names.join(", ")
            )
        }
    }
}

/// The directory's series file if it has exactly one.
fn only_series_in(dir: &Path) -> Result<Option<PathBuf>> {
    let Ok(entries) = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }) else {
        return Ok(None);
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".series.jsonl"))
        .collect();
    Ok(if found.len() == 1 { found.pop() } else { None })
}

/// Reads a series file; a last line cut short is left out (and said), any
/// other line that does not parse is an error naming it.
pub fn read_series(path: &Path) -> Result<Series> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the series {}", path.display()))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let Some(first) = lines.first() else {
        bail!("{}: an empty series file", path.display());
    };
    let header: Value = serde_json::from_str(first)
        .map_err(|e| anyhow!("{}:1: not a series header: {e}", path.display()))?;
    if header["format"].as_str() != Some("netloop-series/1") {
        bail!(
            "{}:1: not a netloop-series/1 file (format {})",
            path.display(),
            header["format"]
        );
    }
    let mut samples = Vec::new();
    let mut truncated = false;
    for (i, line) in lines.iter().enumerate().skip(1) {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => samples.push(v),
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => truncated = true,
            Err(e) => bail!("{}:{}: not a sample: {e}", path.display(), i + 1),
        }
    }
    Ok(Series {
        path: path.to_path_buf(),
        header,
        samples,
        truncated,
    })
}
