//! Printing helpers shared by the commands.

use std::io::Write;

/// Print an error chain to stderr. Lines starting with `hint:` are kept as they are so
/// the hint stands out at the end.
pub fn print_error(err: &anyhow::Error) {
    // A batch job's stderr is a log file: a key a server quoted back must not reach it.
    let text = peak_workflow::redact_secrets(&format!("{err:#}")).into_owned();
    let mut stderr = std::io::stderr().lock();
    let (hints, body): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.trim_start().starts_with("hint:"));
    let _ = writeln!(stderr, "error: {}", body.join("\n"));
    for hint in hints {
        let _ = writeln!(stderr, "{}", hint.trim_start());
    }
}

/// Print a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    println!("{text}");
    Ok(())
}

/// Milliseconds in a unit that reads well.
pub fn format_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.3} s", ms / 1000.0)
    } else if ms >= 1.0 {
        format!("{ms:.3} ms")
    } else {
        format!("{:.2} µs", ms * 1000.0)
    }
}
