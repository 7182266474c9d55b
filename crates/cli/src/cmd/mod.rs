//! One module per subcommand: flags, then a typed config, then one library call.

pub(crate) mod cap;
pub(crate) mod doctor;
pub(crate) mod gateway;
pub(crate) mod linkem;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod output;
pub(crate) mod pipeline;
pub(crate) mod report;
pub(crate) mod reproduce;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod singleip;
pub(crate) mod singleip_probe;
pub(crate) mod soak;
pub(crate) mod sweep;
pub(crate) mod webset;

/// Fails now (exit 2) when `path`, given with `flag`, could not be written
/// when the run ends: an output path is checked before anything is
/// measured, not after.
pub(crate) fn check_output(flag: &str, path: Option<&std::path::Path>) -> Result<(), crate::Exit> {
    let Some(path) = path else {
        return Ok(());
    };
    connlab_os::files::check_writable(path).map_err(|e| {
        crate::Exit::usage(anyhow::anyhow!(
            "{flag} {}: cannot be written: {e}",
            path.display()
        ))
    })
}

/// Writes `value` to `path` (given with `flag`) as pretty JSON and a
/// newline, replacing the file at once (exit 1 on failure).
pub(crate) fn write_json(
    flag: &str,
    path: &std::path::Path,
    value: &impl serde::Serialize,
) -> Result<(), crate::Exit> {
    use anyhow::Context as _;
    let json = serde_json::to_string_pretty(value).context("encoding the results")?;
    connlab_os::files::write_atomic(path, json + "\n")
        .with_context(|| format!("writing {flag} file {}", path.display()))?;
    Ok(())
}
