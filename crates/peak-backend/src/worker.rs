//! Crash-isolated execution: compiled kernels run in a worker process, one per device.
//!
//! Every kernel is LLM-written code. A bad one can hang the device, leave a CUDA context
//! broken after an illegal address (sticky until the process ends), or crash the process
//! outright (on PoCL a wild write lands in the host process). So the caller never runs a
//! kernel itself: it talks to a child process, `peak worker --backend NAME`, through
//! line-delimited JSON on the child's stdin and stdout, and restarts it when it dies or
//! stops answering. The variant that was running is reported `crashed` or `timed-out`;
//! every other queued variant is sent again to the new worker.
//!
//! ## Protocol (version [`PROTOCOL_VERSION`])
//!
//! Parent → worker, one [`Request`] per line: `{"id":7,"context":"/path","params":{...},
//! "options":{...RunOptions},"outputs":{"mode":"digest"|"bytes"|"compare",...}}`. A request
//! with `"yardstick":"vendor"|"copy"` compiles nothing: the run thread times that
//! yardstick for the context at `params` (`crate::yardstick::measure`), and the answer's
//! `times_ms` are its, with `yardstick` saying what ran.
//!
//! Worker → parent, one [`Message`] per line, tagged by `event`:
//! - `ready` once at start-up, with the device and the protocol version;
//! - `unavailable` instead, when the backend cannot open (then the worker exits);
//! - `started` when a request's kernels begin to run on the device (the parent's
//!   time-out clock for that request starts here, not while it waits to compile; a
//!   `compile_only` request never starts);
//! - `done` with a [`RunReport`] or a [`Failure`] (category + message + compiler log).
//!
//! Requests are pipelined: the worker compiles up to one request per core at once
//! (`Backend::compile` is `Send + Sync`) while it runs them on the device one at a time,
//! in the order their compiles end, and answers each as soon as it is done. Answers come
//! in any order; the parent matches them by id. A request whose run faults is answered
//! `crashed` (after the requests that ran before it), then the worker exits: the device
//! context is not trusted after a fault.
//!
//! ## Attribution
//!
//! A death while a request is `started` is that request's, when no other request that
//! started on that worker is still unanswered. A death (or silence past the compile
//! time-out) with nothing started happened while compiling, where several requests are in
//! flight at once; the pool then resends them one at a time until the culprit shows
//! itself, so no innocent variant is ever blamed.
//!
//! ## Process hygiene
//!
//! The worker moves its stdout to a private descriptor and points descriptor 1 at stderr,
//! so a kernel's `printf` cannot corrupt the protocol. On Linux the child asks to be killed
//! when its parent dies (`PR_SET_PDEATHSIG`), and it runs in its own process group, so a
//! time-out also kills whatever it wrapped (compute-sanitizer, Nsight Compute start the
//! real worker as their child).

mod command;
mod compile;
mod error;
mod execute;
mod fleet;
pub mod launcher;
mod outputs;
mod pool;
mod protocol;
mod recycler;
mod resources;
mod serve;
mod supervise;

pub use crate::runner::StageTimes;
pub use command::WorkerCommand;
pub use error::WorkerError;
pub use fleet::{Dispatch, Fleet};
pub use outputs::output_file;
pub use pool::{Answer, PoolOptions, WorkerPool};
pub use protocol::{Failure, FailureKind, Job, Message, OutputMode, OutputReport, PROTOCOL_VERSION, ReferenceArray, Request, RunReport};
pub use resources::{COMPILE_REPORT, check_resources};
pub use serve::{refuse, serve};
pub use supervise::describe_exit;
