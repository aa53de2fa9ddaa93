//! `netloop mn`: Mininet's `mn` command. It lives in the Python package
//! (`netloop.mininet.mn`, beside the Mininet API it drives); this runs it
//! with the Python the package runs in when pip installed the command, or
//! else `python3`, and passes its exit status on.

use std::ffi::OsString;
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};

use crate::PYTHON_ENV;

pub(crate) fn mn(args: &[OsString]) -> Result<ExitCode> {
    let python = std::env::var_os(PYTHON_ENV)
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into());
    let shown = python.to_string_lossy().into_owned();
    let found = Command::new(&python)
        .args(["-c", "import netloop.mininet.mn"])
        .output()
        .with_context(|| format!("netloop mn runs in Python: starting `{shown}`"))?;
    if !found.status.success() {
        bail!(
            "netloop mn is part of the Python package, which `{shown}` cannot import: \
             pip install ./crates/netloop-py (or set {PYTHON_ENV} to a Python that has it)\n{}",
            String::from_utf8_lossy(&found.stderr).trim_end()
        );
    }
    let status = Command::new(&python)
        .args(["-m", "netloop.mininet.mn"])
        .args(args)
        .status()
        .with_context(|| format!("starting `{shown} -m netloop.mininet.mn`"))?;
    // A signal's death (no code) is a failure like any other.
    Ok(ExitCode::from(
        status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1)),
    ))
}
