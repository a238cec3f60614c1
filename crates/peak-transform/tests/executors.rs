//! The LLM executor against a scripted local server speaking both protocols.
// Helpers outside #[test] functions unwrap too; clippy's allow-unwrap-in-tests does not reach them here (rust-clippy#13981).
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use peak_spec::{Region, Regions};
use peak_transform::testing::{FakeLlmServer, Scripted};

/// A GEMM, the pattern the matmul transformations are written for.
const GEMM: KernelBrief<'static> = KernelBrief { pattern: Some(peak_spec::Pattern::Gemm), description: "" };
use peak_transform::{
    ContextParam, Executor, ExecutorError, ExecutorSpec, KernelBrief, Language, Library, LlmConfig, LlmExecutor, Outcome, PassRequest, PromptContext, Protocol,
    ReplyError, Response, RetryPolicy, Transcript,
};

const KEY: &str = "sk-test-0123456789";

fn fast_retries(max_retries: u32) -> RetryPolicy {
    RetryPolicy { max_retries, initial_backoff: Duration::from_millis(10), max_wait: Duration::from_secs(5) }
}

fn openai(server: &FakeLlmServer) -> LlmExecutor {
    LlmExecutor::new(LlmConfig::new(Protocol::OpenAiChat, server.openai_base_url(), "gpt-test").with_api_key(KEY).with_retry(fast_retries(3))).unwrap()
}

fn anthropic(server: &FakeLlmServer) -> LlmExecutor {
    LlmExecutor::new(LlmConfig::new(Protocol::AnthropicMessages, server.anthropic_base_url(), "claude-test").with_api_key(KEY).with_retry(fast_retries(3)))
        .unwrap()
}

fn request(prompt: &str) -> PassRequest {
    PassRequest { transformation: "Refactor".into(), pass: 1, attempt: 1, prompt: prompt.into() }
}

async fn reply(executor: &LlmExecutor, prompt: &str) -> Result<Response, ExecutorError> {
    match executor.execute(&request(prompt)).await? {
        Outcome::Reply(response) => Ok(response),
        Outcome::Waiting(p) => panic!("an LLM never waits: {p:?}"),
    }
}

#[tokio::test]
async fn openai_good_reply_records_producer_tokens_and_latency() {
    let server = FakeLlmServer::start([Scripted::Reply { text: "```c\nint x;\n```".into(), tokens_in: 321, tokens_out: 45 }]).await.unwrap();
    let executor = openai(&server);
    let response = reply(&executor, "make it fast").await.unwrap();
    assert_eq!(response.producer, "gpt-test");
    assert_eq!(response.text, "```c\nint x;\n```");
    assert_eq!((response.tokens_in, response.tokens_out), (Some(321), Some(45)));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(requests[0].prompt().as_deref(), Some("make it fast"));
    assert_eq!(requests[0].json().unwrap()["model"], "gpt-test");
}

#[tokio::test]
async fn anthropic_good_reply() {
    let server = FakeLlmServer::start([Scripted::reply("```cuda\n__global__ void k() {}\n```")]).await.unwrap();
    let executor = anthropic(&server);
    let response = reply(&executor, "tile it").await.unwrap();
    assert_eq!(response.producer, "claude-test");
    assert_eq!((response.tokens_in, response.tokens_out), (Some(100), Some(20)));
    let requests = server.requests();
    assert_eq!(requests[0].path, "/anthropic/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some(KEY));
    assert!(requests[0].header("anthropic-version").is_some());
    assert_eq!(requests[0].prompt().as_deref(), Some("tile it"));
}

#[tokio::test]
async fn rate_limit_is_retried_honouring_retry_after() {
    let server = FakeLlmServer::start([Scripted::rate_limited(1), Scripted::reply("```c\nok\n```")]).await.unwrap();
    let executor = openai(&server);
    let started = Instant::now();
    let response = reply(&executor, "p").await.unwrap();
    assert_eq!(response.text, "```c\nok\n```");
    assert_eq!(server.requests().len(), 2);
    // The backoff alone would have waited 10 ms; the server asked for a second.
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let server = FakeLlmServer::start([Scripted::status(503), Scripted::reply("```c\nok\n```")]).await.unwrap();
    assert_eq!(reply(&anthropic(&server), "p").await.unwrap().text, "```c\nok\n```");

    // Scripts can also grow after the server has started.
    let server = FakeLlmServer::start([Scripted::status(500), Scripted::status(502)]).await.unwrap();
    server.push(Scripted::status(500));
    server.push(Scripted::status(500));
    let err = reply(&openai(&server), "p").await.unwrap_err();
    assert!(matches!(&err, ExecutorError::RetriesExhausted { status: 500, attempts: 4, .. }), "{err}");
    assert!(err.to_string().contains("scripted 500"), "{err}");
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn client_errors_fail_at_once_without_the_key() {
    let server = FakeLlmServer::start([Scripted::status(401), Scripted::reply("never sent")]).await.unwrap();
    let err = reply(&openai(&server), "p").await.unwrap_err();
    assert!(matches!(&err, ExecutorError::Http { status: 401, .. }), "{err}");
    assert!(!err.to_string().contains(KEY) && !format!("{err:?}").contains(KEY), "{err:?}");
    assert_eq!(server.remaining(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn a_key_the_server_quotes_back_is_scrubbed_from_the_error() {
    for speaks_anthropic in [false, true] {
        let server = FakeLlmServer::start([Scripted::unauthorized_echoing_key()]).await.unwrap();
        let executor = if speaks_anthropic { anthropic(&server) } else { openai(&server) };
        let err = reply(&executor, "p").await.unwrap_err();
        assert!(matches!(&err, ExecutorError::Http { status: 401, .. }), "{err}");
        let text = format!("{err} {err:?}");
        assert!(text.contains("Incorrect API key provided: [REDACTED]") && !text.contains(KEY), "{text}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn slow_server_times_out() {
    let server = FakeLlmServer::start([Scripted::reply("late").delayed(Duration::from_secs(3))]).await.unwrap();
    let config = LlmConfig::new(Protocol::OpenAiChat, server.openai_base_url(), "gpt-test").with_api_key(KEY).with_timeout(Duration::from_millis(300));
    let executor = LlmExecutor::new(config).unwrap();
    let started = Instant::now();
    let err = reply(&executor, "p").await.unwrap_err();
    assert!(matches!(&err, ExecutorError::Timeout { .. }), "{err}");
    assert_eq!(err.kind(), "timeout");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn malformed_replies_are_errors_not_panics() {
    let server = FakeLlmServer::start([
        Scripted::malformed_json(),
        Scripted::Raw { status: 200, content_type: "application/json".into(), body: r#"{"unexpected": true}"#.into() },
        Scripted::Raw { status: 200, content_type: "text/html".into(), body: "<html>proxy</html>".into() },
    ])
    .await
    .unwrap();
    let executor = openai(&server);
    for _ in 0..3 {
        let err = reply(&executor, "p").await.unwrap_err();
        assert!(matches!(&err, ExecutorError::MalformedResponse { .. } | ExecutorError::EmptyResponse { .. }), "{err}");
    }
    assert_eq!(server.requests().len(), 3, "malformed replies are not retried");
}

#[tokio::test]
async fn a_reply_with_two_code_blocks_is_an_attempt_outcome() {
    let library = Library::builtin().unwrap();
    let refactor = library.get("Refactor").unwrap();
    let regions = Regions::new("", "__kernel void matmul() {}\n", "launch(\"matmul\", 1, 1, 0);\n");
    let tuning = [ContextParam::new("BLOCK_X", "8, 16"), ContextParam::new("BLOCK_Y", "8, 16")];
    let ctx = PromptContext { kernel: GEMM, regions: &regions, backend: Language::Opencl, tuning: &tuning, inputs: &[], constraints: &[] };
    let prompt = library.pass_prompt(refactor, 1, &ctx).unwrap();

    let server = FakeLlmServer::start([
        Scripted::reply("First:\n```c\n#define TX get_local_id(0)\n```\nor:\n```c\n#define TX 0\n```"),
        Scripted::reply("<think>Two options... ```c\nx\n```</think>\n```c\n#define TX get_local_id(0)\n```"),
    ])
    .await
    .unwrap();
    let executor = anthropic(&server);
    let mut transcript = Transcript::default();
    for attempt in 1..=2 {
        let req = PassRequest { transformation: refactor.name.clone(), pass: 1, attempt, prompt: prompt.text.clone() };
        let Outcome::Reply(response) = executor.execute(&req).await.unwrap() else { panic!("expected a reply") };
        transcript.push(&req, &response);
    }
    assert_eq!(prompt.accept(&transcript.entries[0].response, &regions), Err(ReplyError::MultipleCodeBlocks(2)));
    assert_eq!(prompt.accept(&transcript.entries[1].response, &regions).unwrap(), "#define TX get_local_id(0)\n");
    assert_eq!(server.requests()[0].prompt().as_deref(), Some(prompt.text.as_str()));
    assert!(transcript.entries.iter().all(|e| e.producer == "claude-test" && e.prompt == prompt.text));
    assert_eq!(prompt.region, Region::Macros);
}

#[tokio::test]
async fn missing_key_is_reported_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let spec: ExecutorSpec = "openai:gpt-4.1".parse().unwrap();
    let err = spec.build(dir.path(), |_| None).err().unwrap();
    assert_eq!(err.to_string(), "openai:gpt-4.1 needs an API key: set OPENAI_API_KEY");

    // An Ollama model needs no key, and the agent executor records `agent`.
    let spec: ExecutorSpec = "ollama:qwen2.5-coder:7b".parse().unwrap();
    assert_eq!(spec.build(dir.path(), |_| None).unwrap().producer(), "qwen2.5-coder:7b");
    let spec: ExecutorSpec = "agent".parse().unwrap();
    assert_eq!(spec.build(dir.path(), |_| None).unwrap().producer(), "agent");
}

#[tokio::test]
async fn base_url_override_reaches_the_fake_server() {
    let server = FakeLlmServer::start([Scripted::reply("```c\nok\n```")]).await.unwrap();
    let base = server.anthropic_base_url();
    let env = |var: &str| match var {
        "ANTHROPIC_API_KEY" => Some(KEY.to_string()),
        "PEAK_ANTHROPIC_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let spec: ExecutorSpec = "anthropic:claude-sonnet-4-5".parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let executor = spec.build(dir.path(), env).unwrap();
    let Outcome::Reply(response) = executor.execute(&request("p")).await.unwrap() else { panic!("expected a reply") };
    assert_eq!(response.producer, "claude-sonnet-4-5");
    assert_eq!(server.requests()[0].header("x-api-key"), Some(KEY));
}
