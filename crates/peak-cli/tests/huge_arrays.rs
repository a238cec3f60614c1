//! Arrays larger than the host's memory are refused with an error naming them and their
//! bytes, by every command that runs a kernel, instead of aborting on the allocation
//! (SIGABRT, exit 134). Nothing that large is ever allocated. PoCL runs the kernels; the
//! test skips, saying why, without it.

mod support;

use std::process::Output;

use support::{Env, example, opencl_present, s};

/// The host's total memory in bytes, from /proc/meminfo.
fn host_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kib = meminfo.lines().find(|l| l.starts_with("MemTotal:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
    kib.unwrap_or(0) * 1024
}

fn said(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn arrays_beyond_memory_are_refused_by_name_in_every_command() {
    if !opencl_present("arrays_beyond_memory_are_refused_by_name_in_every_command") {
        return;
    }
    let env = Env::new();
    // Three n x n f32 arrays: 40 GB, or twice this host's memory if it has more.
    let bytes = 40_000_000_000u64.max(2 * host_memory());
    let n = ((bytes / 12) as f64).sqrt().ceil() as u64;
    let ctx = env.path("huge");
    std::fs::create_dir_all(&ctx).unwrap();
    let source = std::path::Path::new(&example("matmul-opencl-naive")).to_path_buf();
    std::fs::copy(source.join("kernel.cl"), ctx.join("kernel.cl")).unwrap();
    let manifest = std::fs::read_to_string(source.join("peak.toml")).unwrap();
    let manifest = manifest.replace("n = { values = [256, 512, 1024] }", &format!("n = {{ values = [{n}] }}"));
    assert!(manifest.contains(&n.to_string()), "the example's sizes changed; update this test");
    std::fs::write(ctx.join("peak.toml"), manifest).unwrap();
    let c = s(&ctx);

    for args in [
        vec!["run", c, "--set", "BLOCK_X=16", "--set", "BLOCK_Y=16"],
        vec!["check", c, "--against", c, "--samples", "1"],
        vec!["validate", c, "--against", c, "--samples", "2"],
        vec!["tune", c, "--budget", "2"],
        vec!["baseline", c, "--against", "copy", "--set", "BLOCK_X=16", "--set", "BLOCK_Y=16"],
    ] {
        let out = env.peak(&args);
        let text = said(&out);
        assert_eq!(out.status.code(), Some(1), "peak {} must fail cleanly, not abort:\n{text}", args[0]);
        let each = format!("{:.1} GB", (n * n * 4) as f64 / 1e9);
        assert!(
            text.contains(&format!("the arrays take {} bytes", 3 * n * n * 4)) && ["A", "B", "C"].iter().all(|a| text.contains(&format!("{a} {each}"))),
            "peak {} names the arrays and their bytes:\n{text}",
            args[0]
        );
        assert!(!text.contains("memory allocation of"), "{text}");
    }
}
