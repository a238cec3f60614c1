//! What every benchmark's JSON says about itself: the commit it was built from and when
//! it ran.

/// The commit: as given (`--commit`), else `$PEAK_COMMIT` (set by bench scripts that
/// carry a binary to a machine without the repository), else `git rev-parse HEAD`.
pub fn commit(given: Option<String>) -> String {
    given
        .or_else(|| std::env::var("PEAK_COMMIT").ok())
        .or_else(|| {
            let out = std::process::Command::new("git").args(["rev-parse", "HEAD"]).output().ok()?;
            out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Now, in UTC, as RFC 3339 (the format of every other timestamp peak writes).
pub fn date() -> String {
    peak_workflow::now_rfc3339()
}
