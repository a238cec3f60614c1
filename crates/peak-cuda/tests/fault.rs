//! An illegal address on the GPU is a `Fault` ("crashed"), and the backend says the context
//! is gone afterwards. This is its own test binary because a fault breaks the CUDA context
//! of the whole process, which would fail any test running beside it.

use peak_backend::runner::{RunOptions, run};
use peak_cuda::CudaBackend;
use peak_spec::Context;

#[test]
fn an_illegal_address_is_a_fault_and_the_context_stays_broken() {
    let backend = match CudaBackend::new() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("SKIPPED an_illegal_address_is_a_fault_and_the_context_stays_broken: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("peak.toml"),
        "[kernel]\nname = \"wild\"\nbackend = \"cuda\"\nsource = \"k.cu\"\n\n[inputs]\nn = { values = [1024] }\n\n\
         [[arrays]]\nname = \"C\"\ntype = \"f32\"\nsize = \"n\"\ninit = \"zeros\"\noutput = true\n",
    )
    .unwrap();
    // Writes one terabyte past the end of C: no allocation is there.
    std::fs::write(
        dir.path().join("k.cu"),
        "// @peak macros\n// @peak device\nextern \"C\" __global__ void wild(float* c, int n) { c[(1ll << 38) + threadIdx.x] = 1.0f; }\n\
         // @peak host\nlaunch(\"wild\", 1, 32, 0, C, n);\n",
    )
    .unwrap();
    let ctx = Context::load(dir.path()).unwrap();
    let params = ctx.space().iter().next().unwrap();
    let options = RunOptions { repetitions: 0, ..RunOptions::default() };
    let err = run(&backend, &ctx, &params, &options).expect_err("the kernel writes out of bounds");
    assert_eq!(err.category(), "crashed", "{err}");
    let text = err.to_string();
    assert!(text.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{text}");
    assert!(text.contains("new process"), "the message must say the context is gone: {text}");

    // Anything after that says why it cannot run, instead of an unrelated failure.
    let again = run(&backend, &ctx, &params, &options).expect_err("the context is broken");
    assert_eq!(again.category(), "crashed", "{again}");
    assert!(again.to_string().contains("earlier fault"), "{again}");
}
