//! LLM providers, through the `genai` client.
//!
//! genai speaks both wire protocols peak needs (OpenAI chat completions, Anthropic
//! messages), takes a complete service target (endpoint, key, adapter) per call so custom
//! base URLs need no global configuration, and exposes the HTTP status and headers of a
//! failed call, which is all a retry policy needs. The policy itself is ours:
//!
//! - 429 and 5xx are retried with exponential backoff, waiting what `retry-after` /
//!   `retry-after-ms` asks when the server says (capped by [`RetryPolicy::max_wait`]);
//!   connection failures are retried the same way. Each retry is announced on stderr with
//!   its wait as it happens, so a run never sits silent on a failing endpoint.
//! - Before an apply starts, [`LlmExecutor::check_reachable`] opens one TCP connection to
//!   the endpoint with a short time-out: an endpoint that is down fails at once.
//! - A request that outlives [`LlmConfig::timeout`] is not retried: a model that is too
//!   slow once is usually too slow again, and each try costs the full time-out.
//! - Other 4xx (bad key, unknown model) and malformed bodies fail at once with the
//!   server's message.
//!
//! The key lives only in this process's memory: [`LlmConfig`]'s `Debug` redacts it, no
//! error or [`Response`] carries request headers, and a server's error text that quotes
//! the key back is scrubbed of it before it becomes an error.

use std::fmt;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use genai::adapter::AdapterKind;
use genai::chat::{ChatMessage, ChatOptions, ChatRequest, ChatResponse};
use genai::resolver::{AuthData, Endpoint};
use genai::{Client, ModelIden, ServiceTarget, WebConfig};

use super::spec::{Protocol, Provider};
use super::{BoxFuture, Executor, ExecutorError, Outcome, PassRequest, Response};

/// How failed requests are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first try; 0 disables retrying.
    pub max_retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    /// The longest wait between tries, whatever the server asks for.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// At most 2 + 4 + 8 + 16 + 30 s of waiting: a server asking for longer is not waited
    /// for longer than 30 s a try.
    fn default() -> Self {
        RetryPolicy { max_retries: 5, initial_backoff: Duration::from_secs(2), max_wait: Duration::from_secs(30) }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based), or what the server asked for.
    fn wait(&self, retry: u32, server_asked: Option<Duration>) -> Duration {
        let backoff = self.initial_backoff.saturating_mul(1u32.checked_shl(retry.saturating_sub(1)).unwrap_or(u32::MAX));
        server_asked.unwrap_or(backoff).min(self.max_wait)
    }
}

/// Where and how to reach one model.
#[derive(Clone)]
pub struct LlmConfig {
    pub protocol: Protocol,
    /// Base URL, e.g. `https://api.openai.com/v1`; the protocol's path is appended.
    pub base_url: String,
    pub model: String,
    /// Per-request limit, from sending the request to the last byte of the answer.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    /// Output token limit; `None` leaves it to the provider (Anthropic requires one, and
    /// genai picks the model's maximum).
    pub max_tokens: Option<u32>,
    api_key: Option<String>,
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmConfig")
            .field("protocol", &self.protocol)
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("max_tokens", &self.max_tokens)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Ten minutes: reasoning models think for minutes on a long kernel.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// How long [`LlmExecutor::check_reachable`] waits for a connection: a server that is up
/// accepts in milliseconds, even across the world.
const CONNECT_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// What stands for the key in a server's text that quoted it.
const REDACTED: &str = "[REDACTED]";

impl LlmConfig {
    pub fn new(protocol: Protocol, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        LlmConfig {
            protocol,
            base_url: base_url.into(),
            model: model.into(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            max_tokens: None,
            api_key: None,
        }
    }

    /// The configuration for `provider:model`, reading the base-URL override and the key
    /// through `env` (the CLI passes `|name| std::env::var(name).ok()`).
    pub fn from_provider(provider: &Provider, model: &str, env: impl Fn(&str) -> Option<String>) -> Result<LlmConfig, ExecutorError> {
        let base_url = provider.base_url_env().and_then(&env).filter(|url| !url.trim().is_empty()).unwrap_or_else(|| provider.default_base_url().to_string());
        let mut config = LlmConfig::new(provider.protocol(), base_url, model);
        if let Some((var, required)) = provider.key_env() {
            match env(var).filter(|key| !key.trim().is_empty()) {
                Some(key) => config.api_key = Some(key.trim().to_string()),
                None if required => return Err(ExecutorError::MissingApiKey { provider: format!("{}:{model}", provider.name()), env_var: var.to_string() }),
                None => {}
            }
        }
        Ok(config)
    }

    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }
}

/// An executor backed by one model.
pub struct LlmExecutor {
    config: LlmConfig,
    client: Client,
}

impl LlmExecutor {
    pub fn new(config: LlmConfig) -> Result<LlmExecutor, ExecutorError> {
        let web = WebConfig::default().with_connect_timeout(Duration::from_secs(30));
        let client = Client::builder().with_web_config(web).build().map_err(|e| ExecutorError::Connection {
            model: config.model.clone(),
            url: config.base_url.clone(),
            detail: e.to_string(),
        })?;
        Ok(LlmExecutor { config, client })
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    fn target(&self) -> ServiceTarget {
        let adapter = match self.config.protocol {
            Protocol::OpenAiChat => AdapterKind::OpenAI,
            Protocol::AnthropicMessages => AdapterKind::Anthropic,
        };
        // genai appends the protocol's path to the base URL, which must end with '/'.
        let mut base = self.config.base_url.trim_end_matches('/').to_string();
        base.push('/');
        // A keyless local server still gets a placeholder bearer key: genai's OpenAI
        // adapter insists on one, and servers without auth ignore the header.
        let auth = AuthData::from_single(self.config.api_key.clone().unwrap_or_else(|| "no-key".to_string()));
        ServiceTarget { endpoint: Endpoint::from_owned(base), auth, model: ModelIden::new(adapter, self.config.model.as_str()) }
    }

    async fn run(&self, request: &PassRequest) -> Result<Outcome, ExecutorError> {
        let model = self.config.model.clone();
        let chat = ChatRequest::new(vec![ChatMessage::user(request.prompt.clone())]);
        let mut options = ChatOptions::default().with_capture_usage(true);
        if let Some(max) = self.config.max_tokens {
            options = options.with_max_tokens(max);
        }
        let mut retry = 0;
        loop {
            let started = Instant::now();
            let call = self.client.exec_chat(self.target(), chat.clone(), Some(&options));
            let result = tokio::time::timeout(self.config.timeout, call).await;
            let latency_ms = started.elapsed().as_millis() as u64;
            let error = match result {
                Err(_) => return Err(ExecutorError::Timeout { model, after: self.config.timeout }),
                Ok(Ok(response)) => return self.response(response, latency_ms).map(Outcome::Reply),
                Ok(Err(error)) => self.classify(error),
            };
            match error {
                Failure::Retryable { server_asked, status, .. } if retry < self.config.retry.max_retries => {
                    retry += 1;
                    let wait = self.config.retry.wait(retry, server_asked);
                    let what = status.map_or_else(|| "no connection".to_string(), |s| format!("HTTP {s}"));
                    eprintln!(
                        "{model}: {what} from {}; retry {retry} of {} in {:.1} s",
                        self.config.base_url,
                        self.config.retry.max_retries,
                        wait.as_secs_f64()
                    );
                    tokio::time::sleep(wait).await;
                }
                Failure::Retryable { status: Some(status), body, .. } => {
                    return Err(ExecutorError::RetriesExhausted { model, status, attempts: retry + 1, body });
                }
                Failure::Retryable { status: None, body, .. } => {
                    return Err(ExecutorError::Connection { model, url: self.config.base_url.clone(), detail: body });
                }
                Failure::Fatal(error) => return Err(error),
            }
        }
    }

    fn response(&self, response: ChatResponse, latency_ms: u64) -> Result<Response, ExecutorError> {
        let texts = response.texts();
        if texts.iter().all(|t| t.trim().is_empty()) {
            return Err(ExecutorError::EmptyResponse { model: self.config.model.clone() });
        }
        // The server's name for the model is the precise one (a dated snapshot rather
        // than an alias), which is what a transcript should remember.
        let served = response.provider_model_iden.model_name.to_string();
        let producer = if served.trim().is_empty() { self.config.model.clone() } else { served };
        let count = |n: Option<i32>| n.and_then(|n| u64::try_from(n).ok());
        Ok(Response {
            producer,
            text: texts.join("\n"),
            tokens_in: count(response.usage.prompt_tokens),
            tokens_out: count(response.usage.completion_tokens),
            latency_ms,
        })
    }

    /// `text` without the key: some servers quote the key they were sent back in their
    /// error text ("Incorrect API key provided: ..."), and errors end up in records.
    fn scrub(&self, text: String) -> String {
        match self.config.api_key.as_deref().filter(|key| !key.is_empty()) {
            Some(key) if text.contains(key) => text.replace(key, REDACTED),
            _ => text,
        }
    }

    /// Open one connection to the endpoint, failing within [`CONNECT_CHECK_TIMEOUT`].
    fn connect(&self) -> Result<(), String> {
        let (host, port) = host_port(&self.config.base_url).ok_or("not an http:// or https:// URL with a host")?;
        let addresses = (host.as_str(), port).to_socket_addrs().map_err(|e| format!("cannot resolve {host}: {e}"))?;
        let mut last = format!("{host} has no address");
        for address in addresses {
            match TcpStream::connect_timeout(&address, CONNECT_CHECK_TIMEOUT) {
                Ok(_) => return Ok(()),
                Err(e) => last = format!("{address}: {e}"),
            }
        }
        Err(last)
    }

    fn classify(&self, error: genai::Error) -> Failure {
        let model = self.config.model.clone();
        if let Some(status) = error.status() {
            let server_asked = retry_after(&error);
            let body = self.scrub(failed_body(&error));
            if status.as_u16() == 429 || status.is_server_error() {
                return Failure::Retryable { status: Some(status.as_u16()), body, server_asked };
            }
            return Failure::Fatal(ExecutorError::Http { model, status: status.as_u16(), body });
        }
        let webc = match &error {
            genai::Error::WebModelCall { webc_error, .. } | genai::Error::WebAdapterCall { webc_error, .. } => Some(webc_error),
            _ => None,
        };
        match webc {
            Some(genai::webc::Error::Reqwest(e)) if e.is_timeout() => Failure::Fatal(ExecutorError::Timeout { model, after: self.config.timeout }),
            Some(genai::webc::Error::Reqwest(e)) if e.is_connect() => Failure::Retryable { status: None, body: self.scrub(e.to_string()), server_asked: None },
            _ => Failure::Fatal(ExecutorError::MalformedResponse { model, detail: self.scrub(clip(&error.to_string())) }),
        }
    }
}

enum Failure {
    Retryable { status: Option<u16>, body: String, server_asked: Option<Duration> },
    Fatal(ExecutorError),
}

impl Executor for LlmExecutor {
    fn producer(&self) -> String {
        self.config.model.clone()
    }

    fn execute<'a>(&'a self, request: &'a PassRequest) -> BoxFuture<'a, Result<Outcome, ExecutorError>> {
        Box::pin(self.run(request))
    }

    fn check_reachable(&self) -> Result<(), ExecutorError> {
        self.connect().map_err(|detail| ExecutorError::Connection {
            model: self.config.model.clone(),
            url: self.config.base_url.clone(),
            detail: format!("{detail} (checked before asking anything)"),
        })
    }
}

/// The host and port of an `http://` or `https://` URL (the scheme's port when none is
/// written); an IPv6 host is written in brackets.
fn host_port(url: &str) -> Option<(String, u16)> {
    let (rest, default_port) = match url.trim() {
        u if u.starts_with("http://") => (&u[7..], 80),
        u if u.starts_with("https://") => (&u[8..], 443),
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port,
    };
    (!host.is_empty()).then(|| (host.to_string(), port))
}

/// The body of a failed HTTP response: what the provider said was wrong.
fn failed_body(error: &genai::Error) -> String {
    let body = match error {
        genai::Error::WebModelCall { webc_error: genai::webc::Error::ResponseFailedStatus { body, .. }, .. }
        | genai::Error::WebAdapterCall { webc_error: genai::webc::Error::ResponseFailedStatus { body, .. }, .. }
        | genai::Error::HttpError { body, .. } => body.clone(),
        other => other.to_string(),
    };
    clip(body.trim())
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds. An HTTP date is ignored in
/// favour of our own backoff.
fn retry_after(error: &genai::Error) -> Option<Duration> {
    let headers = error.headers()?;
    let seconds = |name: &str, scale: f64| {
        let value: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value / scale))
    };
    seconds("retry-after-ms", 1000.0).or_else(|| seconds("retry-after", 1.0))
}

/// Server messages can be whole HTML pages; a few lines are enough to say what happened.
fn clip(text: &str) -> String {
    const MAX: usize = 2_000;
    if text.chars().count() <= MAX {
        return text.to_string();
    }
    let head: String = text.chars().take(MAX).collect();
    format!("{head} [...]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_honours_the_server_within_the_cap() {
        let policy = RetryPolicy { max_retries: 5, initial_backoff: Duration::from_millis(100), max_wait: Duration::from_secs(1) };
        assert_eq!(policy.wait(1, None), Duration::from_millis(100));
        assert_eq!(policy.wait(3, None), Duration::from_millis(400));
        assert_eq!(policy.wait(10, None), Duration::from_secs(1));
        assert_eq!(policy.wait(1, Some(Duration::from_millis(750))), Duration::from_millis(750));
        assert_eq!(policy.wait(1, Some(Duration::from_secs(30))), Duration::from_secs(1));
    }

    #[test]
    fn host_and_port_come_from_the_base_url() {
        assert_eq!(host_port("https://api.openai.com/v1"), Some(("api.openai.com".into(), 443)));
        assert_eq!(host_port("http://127.0.0.1:8000/v1"), Some(("127.0.0.1".into(), 8000)));
        assert_eq!(host_port("http://[::1]:11434/v1"), Some(("::1".into(), 11434)));
        assert_eq!(host_port("http://localhost"), Some(("localhost".into(), 80)));
        assert_eq!(host_port("ftp://host/v1"), None);
        assert_eq!(host_port("http://:80/v1"), None);
    }

    #[test]
    fn an_endpoint_that_is_down_fails_the_check_at_once() {
        // A port that was free a moment ago: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let executor = LlmExecutor::new(LlmConfig::new(Protocol::OpenAiChat, format!("http://127.0.0.1:{port}/v1"), "m")).unwrap();
        let started = Instant::now();
        let err = executor.check_reachable().unwrap_err();
        assert!(started.elapsed() < CONNECT_CHECK_TIMEOUT, "took {:?}", started.elapsed());
        assert!(matches!(err, ExecutorError::Connection { .. }), "{err}");
        assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");

        let listening = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let up = LlmExecutor::new(LlmConfig::new(Protocol::OpenAiChat, format!("http://{}/v1", listening.local_addr().unwrap()), "m")).unwrap();
        up.check_reachable().unwrap();
    }

    #[test]
    fn missing_key_names_the_variable_and_debug_hides_the_key() {
        let no_env = |_: &str| None;
        let err = LlmConfig::from_provider(&Provider::Anthropic, "claude-sonnet-4-5", no_env).unwrap_err();
        assert_eq!(err.to_string(), "anthropic:claude-sonnet-4-5 needs an API key: set ANTHROPIC_API_KEY");

        let env = |var: &str| match var {
            "OPENAI_API_KEY" => Some("sk-secret-123".to_string()),
            "PEAK_OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".to_string()),
            _ => None,
        };
        let config = LlmConfig::from_provider(&Provider::OpenAi, "gpt-4.1", env).unwrap();
        assert_eq!(config.base_url, "http://127.0.0.1:9/v1");
        assert!(!format!("{config:?}").contains("sk-secret"), "{config:?}");

        // Local servers need no key; a compat server never receives the OpenAI key.
        let config = LlmConfig::from_provider(&Provider::OpenAiCompat { base_url: "http://h:1/v1".into() }, "m", env).unwrap();
        assert!(config.api_key.is_none());
        LlmConfig::from_provider(&Provider::Ollama, "qwen2.5-coder", no_env).unwrap();
    }
}
