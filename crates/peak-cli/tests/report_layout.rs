//! The HTML report laid out by a real browser (headless Chromium) at more than one page
//! width, on a recorded OpenCL workflow and on the fp16 line replayed on the H200 (13
//! steps, long step names, a 129x speedup): every table fits its panel without a
//! horizontal scroll, every figure's text lies inside its figure, figure 2's step names
//! hang below its x axis (none crosses into the plot), its largest speedup is written out
//! in full, and the "best step" card names a step.
//!
//! The page has no script of its own; the test measures a copy of it with one added, and
//! reads the verdict from the DOM Chromium dumps.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{Env, s};

/// Measures the laid-out page and writes what does not fit into `<body data-layout>`.
const MEASURE: &str = r#"<script>
window.addEventListener('load', () => {
  const bad = [];
  const text = (node) => node.textContent.trim();
  for (const table of document.querySelectorAll('table')) {
    const panel = table.closest('.panel');
    const title = panel.querySelector('h3').textContent;
    if (table.scrollWidth > panel.clientWidth) bad.push(`table "${title}" is ${table.scrollWidth}px wide in a ${panel.clientWidth}px panel`);
  }
  for (const svg of document.querySelectorAll('figure svg')) {
    const box = svg.getBoundingClientRect();
    for (const label of svg.querySelectorAll('text')) {
      const r = label.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) bad.push(`"${text(label)}" sticks out of its figure`);
    }
  }
  for (const fig of document.querySelectorAll('figure[id$="fig-speedup"] svg')) {
    const points = [...fig.querySelectorAll('circle')].map((c) => c.getBoundingClientRect().bottom);
    const steps = [...fig.querySelectorAll('text')].filter((t) => /^\d+ \S/.test(text(t)));
    if (!steps.length) bad.push('figure 2 names no step');
    for (const t of steps) if (t.getBoundingClientRect().top < Math.max(...points)) bad.push(`figure 2's step name "${text(t)}" crosses into the plot`);
  }
  for (const section of document.querySelectorAll('section.workflow')) {
    const card = (k) => [...section.querySelectorAll('.card')].find((c) => text(c.querySelector('.k')) === k);
    const final = card('final speedup').querySelector('.v').firstChild.textContent.trim();
    const fig = section.querySelector('figure[id$="fig-speedup"] svg');
    if (final !== '-' && fig && ![...fig.querySelectorAll('text')].some((t) => text(t) === final)) bad.push(`figure 2 does not write the final speedup ${final}`);
    const best = text(card('best step').querySelector('.v'));
    if (final !== '-' && !/^\d+\. \S/.test(best)) bad.push(`the best step card says "${best}", not a step`);
  }
  document.body.setAttribute('data-layout', bad.length ? bad.join(' | ') : 'fits');
});
</script>"#;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())))
}

fn bundle(path: &str) -> String {
    s(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)).to_string()
}

/// What the measuring script found on the page at `width` pixels.
fn layout(browser: &Path, env: &Env, page: &Path, width: u32) -> String {
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars", "--dump-dom"])
        .arg(format!("--window-size={width},1200"))
        .arg(format!("--user-data-dir={}", s(&env.path(&format!("profile-{width}")))))
        .arg(format!("file://{}", s(page)))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let at = dom.find("data-layout=\"").unwrap_or_else(|| panic!("the measuring script did not run at {width}px:\n{}", String::from_utf8_lossy(&out.stderr)));
    let rest = &dom[at + "data-layout=\"".len()..];
    rest[..rest.find('"').unwrap()].replace("&quot;", "\"")
}

#[test]
fn the_report_fits_the_page_at_two_widths() {
    let Some(browser) = chromium() else {
        eprintln!("SKIPPED the_report_fits_the_page_at_two_widths: no chromium on PATH (apt-get install chromium; scripts/install-deps.sh does)");
        return;
    };
    let env = Env::new();
    let file = env.path("report.html");
    let opencl = bundle("examples/workflows/matmul-opencl-agent.bundle");
    let h200 = bundle("bench/results/h200-replayed-matmul-cuda-f16-tma-store.bundle");
    env.ok(&["report", &opencl, &h200, "--html", s(&file)]);
    let page = std::fs::read_to_string(&file).unwrap();
    let measured = env.path("measured.html");
    std::fs::write(&measured, page.replace("</body>", &format!("{MEASURE}</body>"))).unwrap();
    for width in [1280, 900] {
        assert_eq!(layout(&browser, &env, &measured, width), "fits", "at {width}px");
    }
}
