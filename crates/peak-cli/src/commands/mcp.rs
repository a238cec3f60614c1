//! `peak mcp`: serve peak's tools to an AI agent over the Model Context Protocol (stdio).
//!
//! The client (Claude Code, Cursor, VS Code, the MCP Inspector) starts this command and
//! talks JSON-RPC on its stdin and stdout; everything else goes to stderr, which clients
//! keep as the server's log. The tools and what they do are in `peak_mcp::server`.

use anyhow::Result;
use peak_backend::worker::launcher::Placement;
use peak_mcp::Settings;

use crate::cli::McpArgs;

pub fn run(args: McpArgs, placement: &Placement) -> Result<()> {
    eprintln!("peak {} MCP server on stdio (tools: contexts, transformations, workflows, validate, tune, profile)", env!("CARGO_PKG_VERSION"));
    let settings = Settings { library_dirs: args.library, cache_dir: args.cache_dir, ..Settings::peak(placement.clone()) };
    peak_mcp::run_stdio(settings)
}
