//! peak for agents: the MCP server.
//!
//! - [`server`]: [`PeakServer`], an MCP server (rmcp) whose tools are the library
//!   operations the `peak` CLI calls: contexts, regions, the transformation library, the
//!   workflow (log, show, diff, tag, branch, checkout, compare), validation, tuning,
//!   profiling, and carrying a transformation out, with the agent executor (the client's
//!   own model writes each region and calls `submit_region`) or with an LLM executor.
//!   [`run_stdio`] serves it on stdin/stdout, which is what `peak mcp` does.
//!   The autonomous mode (`peak_apply::auto`, behind `peak auto`) is the tool `auto`.
//!
//! # Design decisions
//!
//! * **One library, two faces.** Every tool calls the same functions the CLI commands
//!   call (`peak_apply`, `peak_eval`, `peak_workflow`, `peak_transform`); nothing here
//!   re-implements a command. Backends are never named: kernels run in worker processes
//!   made by a [`WorkersFactory`] the caller provides (`peak worker --backend NAME` in the
//!   product, the test binary itself in tests).
//! * **Errors the model can read.** A failed compile, a wrong output, a transformation
//!   that gave up, a missing workflow or a typo in a transformation name are tool results
//!   with `isError: true` and the whole message (compiler log, verdict, `hint:` lines), so
//!   the client's model can repair and retry. Arguments that do not match a tool's schema
//!   are answered in-band the same way (rmcp does so, as the MCP spec asks); JSON-RPC
//!   errors are left to malformed requests and unknown tools.
//! * **Blocking work off the protocol loop.** Validation, tuning and applies are
//!   synchronous and take seconds to minutes; each runs on a blocking thread while the
//!   reporter traits of the libraries feed MCP progress notifications through a channel,
//!   so the server keeps answering `ping`s and other calls meanwhile.
//! * **A clean stdout.** The MCP stream is the process's real stdout, moved to a private
//!   descriptor; descriptor 1 points at stderr, so nothing a library or a driver prints
//!   can corrupt the protocol (the same trick the kernel workers use).

mod answer;
mod import;
mod outputs;
mod params;
mod progress;
mod render;
mod resolve;
mod schema;
pub mod server;
mod settings;

pub use server::{PeakServer, run_stdio, serve_stdio};
pub use settings::{Settings, WorkersFactory};
