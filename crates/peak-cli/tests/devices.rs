//! Tuning and validation spread over several workers, one per device (issue 12). PoCL has
//! one device, so the two workers here share it: what is checked is that the run is whole
//! and that both workers took part, not the speed (that is measured on GPUs, bench/).

mod support;

use support::{Env, example, opencl_present};

#[test]
fn a_tuning_run_over_two_devices_is_whole_and_uses_both() {
    if !opencl_present("a_tuning_run_over_two_devices_is_whole_and_uses_both") {
        return;
    }
    let env = Env::new();
    let run = env.json(&["tune", &example("matmul-opencl-naive"), "--set", "n=128", "--strategy", "exhaustive", "--devices", "0,1", "--json"]);
    let first = &run["runs"][0];
    assert_eq!(first["evaluations"], first["space"], "{run}");
    assert_eq!(first["measured"], first["space"], "{run}");
    assert_eq!(first["failures"], serde_json::json!({}), "{run}");
    let served: Vec<u64> = run["devices_served"].as_array().expect("the report says what each device did").iter().map(|n| n.as_u64().unwrap()).collect();
    assert_eq!(served.len(), 2, "{run}");
    assert!(served.iter().all(|&n| n > 0), "both workers measured configurations: {served:?}");
}

/// Validation's compared runs go to every device's worker too, and each sample gets the
/// verdict it gets on one device: passing samples pass, a wrong kernel still fails on all.
#[test]
fn a_validation_over_two_devices_judges_every_sample_as_one_device_does() {
    if !opencl_present("a_validation_over_two_devices_judges_every_sample_as_one_device_does") {
        return;
    }
    let env = Env::new();
    let (naive, tiled) = (example("matmul-opencl-naive"), example("matmul-opencl-tiled"));
    let validate = |candidate: &str, devices: &[&str]| {
        let out = env.peak(&[&["validate", candidate, "--against", &naive, "--samples", "8", "--set", "n=64", "--json"][..], devices].concat());
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
    };
    let judged = |report: &serde_json::Value| -> Vec<(u64, String)> {
        report["samples"].as_array().unwrap().iter().map(|s| (s["index"].as_u64().unwrap(), s["verdict"]["category"].as_str().unwrap().to_string())).collect()
    };

    let one = validate(&tiled, &[]);
    let two = validate(&tiled, &["--devices", "0,1"]);
    assert_eq!(two["outcome"], "passed", "{two}");
    assert_eq!(judged(&two), judged(&one), "the same samples, the same verdicts");
    assert!(one.get("devices_served").is_none(), "one device spreads nothing: {one}");
    let served: Vec<u64> = two["devices_served"].as_array().expect("the report says what each device ran").iter().map(|n| n.as_u64().unwrap()).collect();
    assert_eq!(served.len(), 2, "{two}");
    assert!(served.iter().all(|&n| n > 0), "both workers ran samples: {served:?}");
    assert_eq!(served.iter().sum::<u64>(), judged(&two).len() as u64, "every sample ran once");

    // Half the rows are never written.
    let lazy = env.path("lazy");
    std::fs::create_dir_all(&lazy).unwrap();
    for file in ["kernel.cl", "peak.toml"] {
        std::fs::copy(std::path::Path::new(&naive).join(file), lazy.join(file)).unwrap();
    }
    let kernel = std::fs::read_to_string(lazy.join("kernel.cl")).unwrap();
    std::fs::write(lazy.join("kernel.cl"), kernel.replace("if (row < n && col < n)", "if (row < n / 2 && col < n)")).unwrap();
    let wrong = validate(lazy.to_str().unwrap(), &["--devices", "0,1"]);
    assert_eq!(wrong["outcome"], "failed", "{wrong}");
    assert!(judged(&wrong).iter().all(|(_, verdict)| verdict == "wrong-output"), "{wrong}");
}
