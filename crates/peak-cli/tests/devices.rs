//! Tuning spread over several workers, one per device (issue 12). PoCL has one device, so
//! the two workers here share it: what is checked is that the run is whole and that both
//! workers took part, not the speed (that is measured on GPUs, bench/).

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
