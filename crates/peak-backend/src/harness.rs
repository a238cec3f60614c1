//! For test binaries that are their own kernel workers (they have no libtest harness, so
//! that started with a variable set they serve as `peak worker`): run their tests through
//! libtest-mimic, so `cargo test` filters and reports as usual, and let each test that
//! needs a device print `SKIPPED <name>: no <device> device: <why>` and pass where there is
//! none. The GPU ones are run where the GPU is (bench/h200-gpu-tests.sh).

pub use libtest_mimic::Failed;
use libtest_mimic::{Arguments, Trial};

pub type Test = fn() -> Result<(), Failed>;

/// Run `tests`, each `(name, needs the device, test)`; `missing` says why the device is
/// absent, `None` where it is present. Exits with the harness's status.
pub fn run_gated(tests: Vec<(&'static str, bool, Test)>, device: &'static str, missing: Option<String>) -> ! {
    let args = Arguments::from_args();
    let trials = tests
        .into_iter()
        .map(|(name, needs_device, test)| {
            let skip = if needs_device { missing.clone() } else { None };
            Trial::test(name, move || match skip {
                Some(why) => {
                    eprintln!("SKIPPED {name}: no {device} device: {why}");
                    Ok(())
                }
                None => test(),
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}
