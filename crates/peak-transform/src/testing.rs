//! A scripted LLM server for tests (cargo feature `testing`).
//!
//! [`FakeLlmServer`] listens on 127.0.0.1 and answers both the OpenAI chat-completions
//! protocol (`POST .../chat/completions`) and Anthropic's messages protocol
//! (`POST .../messages`) from one script of protocol-neutral answers, in order, one per
//! request, whichever protocol asks. It records every request so tests can check what was
//! sent. It is a deliberately small HTTP/1.1 server (one request per connection, always
//! `Connection: close`): enough for reqwest, with nothing to configure.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use peak_transform::testing::{FakeLlmServer, Scripted};
//! let server = FakeLlmServer::start([Scripted::rate_limited(0), Scripted::reply("```c\nint x;\n```")]).await?;
//! let base_url = server.openai_base_url(); // give it to LlmConfig
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Scripted {
    /// A successful completion holding `text`.
    Reply { text: String, tokens_in: u64, tokens_out: u64 },
    /// An error status, with the protocol's error body and an optional `retry-after`.
    Status { status: u16, retry_after: Option<String> },
    /// Exactly this status, content type and body, for malformed answers.
    Raw { status: u16, content_type: String, body: String },
    /// 401 whose error message quotes the key the request carried (its `Authorization:
    /// Bearer` token or `x-api-key`), as some servers do: what must never reach a record.
    EchoKey,
    /// The inner answer, sent after a pause (for time-outs).
    Delayed { delay: Duration, then: Box<Scripted> },
}

impl Scripted {
    pub fn reply(text: impl Into<String>) -> Self {
        Scripted::Reply { text: text.into(), tokens_in: 100, tokens_out: 20 }
    }

    pub fn status(status: u16) -> Self {
        Scripted::Status { status, retry_after: None }
    }

    /// 429 with `retry-after: seconds`.
    pub fn rate_limited(seconds: u64) -> Self {
        Scripted::Status { status: 429, retry_after: Some(seconds.to_string()) }
    }

    /// 401 quoting the request's key back in the error message.
    pub fn unauthorized_echoing_key() -> Self {
        Scripted::EchoKey
    }

    /// 200, JSON content type, body that is not JSON.
    pub fn malformed_json() -> Self {
        Scripted::Raw { status: 200, content_type: "application/json".into(), body: "{\"choices\": [ this is not json".into() }
    }

    pub fn delayed(self, delay: Duration) -> Self {
        Scripted::Delayed { delay, then: Box::new(self) }
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The text of the last user message, in either protocol's request shape.
    pub fn prompt(&self) -> Option<String> {
        let body = self.json()?;
        let last = body.get("messages")?.as_array()?.last()?.get("content")?.clone();
        match last {
            Value::String(text) => Some(text),
            Value::Array(parts) => Some(parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("")),
            _ => None,
        }
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Scripted>,
    requests: Vec<RecordedRequest>,
}

/// The server; it stops when dropped.
pub struct FakeLlmServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl FakeLlmServer {
    /// Start on a free port of 127.0.0.1, answering with `script` in order. A request
    /// past the end of the script gets a 500 saying so, which makes a test that sends more
    /// requests than it planned fail loudly.
    pub async fn start(script: impl IntoIterator<Item = Scripted>) -> std::io::Result<FakeLlmServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State { script: script.into_iter().collect(), requests: Vec::new() }));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    // A client that hangs up mid-request is the client's business.
                    let _ = serve(stream, state).await;
                });
            }
        });
        Ok(FakeLlmServer { addr, state, task })
    }

    /// Base URL for the OpenAI protocol.
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL for the Anthropic protocol.
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}/anthropic/v1", self.addr)
    }

    /// Add answers to the end of the script.
    pub fn push(&self, answer: Scripted) {
        lock(&self.state).script.push_back(answer);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).requests.clone()
    }

    /// Scripted answers not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state).script.len()
    }
}

impl Drop for FakeLlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panicking test thread cannot leave the script half-updated in a way that matters.
    state.lock().unwrap_or_else(|e| e.into_inner())
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    // A connection closed before a request (a reachability check) is not a request.
    if reader.read_line(&mut request_line).await? == 0 {
        return Ok(());
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse::<usize>().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let request = RecordedRequest { method, path, headers, body: String::from_utf8_lossy(&body).into_owned() };
    let sent_key =
        request.header("authorization").map(|v| v.trim_start_matches("Bearer").trim()).or_else(|| request.header("x-api-key")).unwrap_or_default().to_string();

    let anthropic = request.path.ends_with("/messages");
    let known = anthropic || request.path.ends_with("/chat/completions");
    let model = request.json().and_then(|b| b.get("model").and_then(Value::as_str).map(str::to_string)).unwrap_or_default();
    let answer = {
        let mut state = lock(&state);
        state.requests.push(request);
        if known { state.script.pop_front() } else { None }
    };

    let mut answer = match answer {
        Some(answer) => answer,
        None if known => Scripted::Raw { status: 500, content_type: "text/plain".into(), body: "FakeLlmServer: the script is exhausted".into() },
        None => Scripted::Raw { status: 404, content_type: "text/plain".into(), body: "FakeLlmServer: unknown path".into() },
    };
    while let Scripted::Delayed { delay, then } = answer {
        tokio::time::sleep(delay).await;
        answer = *then;
    }
    let (status, content_type, body, retry_after) = match answer {
        Scripted::Reply { text, tokens_in, tokens_out } => {
            (200, "application/json".to_string(), success_body(anthropic, &model, &text, tokens_in, tokens_out), None)
        }
        Scripted::Status { status, retry_after } => (status, "application/json".to_string(), error_body(anthropic, status), retry_after),
        Scripted::Raw { status, content_type, body } => (status, content_type, body, None),
        Scripted::EchoKey => (401, "application/json".to_string(), key_error_body(anthropic, &sent_key), None),
        Scripted::Delayed { .. } => unreachable!("delays are unwrapped above"),
    };
    let mut response =
        format!("HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n", reason(status), body.len());
    if let Some(seconds) = retry_after {
        response.push_str(&format!("retry-after: {seconds}\r\n"));
    }
    response.push_str("\r\n");
    response.push_str(&body);
    let mut stream = reader.into_inner();
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

fn success_body(anthropic: bool, model: &str, text: &str, tokens_in: u64, tokens_out: u64) -> String {
    let body = if anthropic {
        json!({
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}
        })
    } else {
        json!({
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}
        })
    };
    body.to_string()
}

fn error_body(anthropic: bool, status: u16) -> String {
    let message = format!("scripted {status} from FakeLlmServer");
    let body = if anthropic {
        json!({"type": "error", "error": {"type": "api_error", "message": message}})
    } else {
        json!({"error": {"message": message, "type": "server_error", "code": status}})
    };
    body.to_string()
}

fn key_error_body(anthropic: bool, key: &str) -> String {
    let message = format!("Incorrect API key provided: {key}");
    let body = if anthropic {
        json!({"type": "error", "error": {"type": "authentication_error", "message": message}})
    } else {
        json!({"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}})
    };
    body.to_string()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
