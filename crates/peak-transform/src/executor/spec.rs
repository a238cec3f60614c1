//! `--executor` strings.
//!
//! ```text
//! agent                                   a person or AI agent, through `peak submit`
//! openai:MODEL                            api.openai.com (or $PEAK_OPENAI_BASE_URL), key $OPENAI_API_KEY
//! anthropic:MODEL                         api.anthropic.com (or $PEAK_ANTHROPIC_BASE_URL), key $ANTHROPIC_API_KEY
//! openrouter:MODEL                        openrouter.ai, key $OPENROUTER_API_KEY
//! ollama:MODEL                            a local Ollama, http://127.0.0.1:11434/v1 (or $PEAK_OLLAMA_BASE_URL), no key
//! openai-compat:BASE_URL:MODEL            any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, ...);
//!                                         key $PEAK_COMPAT_API_KEY when set, none otherwise
//! ```
//!
//! Only the provider is split off at the first `:`, so model names keep their own colons
//! (`ollama:qwen2.5-coder:7b`). A compat base URL must include its path
//! (`http://127.0.0.1:8000/v1`): the first `:` after the path ends the URL, which is what
//! lets a `host:port` and a model name live in one string. Keys come from environment
//! variables only, never from the spec string, so they cannot end up in shell history,
//! logs or transcripts; a compat server gets its own variable so that an OpenAI key is
//! never sent to an arbitrary URL.

use std::fmt;
use std::str::FromStr;

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST {base}/chat/completions`, bearer key.
    OpenAiChat,
    /// `POST {base}/messages`, `x-api-key`.
    AnthropicMessages,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provider {
    OpenAi,
    Anthropic,
    OpenRouter,
    Ollama,
    OpenAiCompat { base_url: String },
}

impl Provider {
    pub fn name(&self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::OpenRouter => "openrouter",
            Provider::Ollama => "ollama",
            Provider::OpenAiCompat { .. } => "openai-compat",
        }
    }

    pub fn protocol(&self) -> Protocol {
        match self {
            Provider::Anthropic => Protocol::AnthropicMessages,
            _ => Protocol::OpenAiChat,
        }
    }

    /// The base URL, before any environment override.
    pub fn default_base_url(&self) -> &str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com/v1",
            Provider::OpenRouter => "https://openrouter.ai/api/v1",
            Provider::Ollama => "http://127.0.0.1:11434/v1",
            Provider::OpenAiCompat { base_url } => base_url,
        }
    }

    /// The environment variable that overrides the base URL, where one does.
    pub fn base_url_env(&self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("PEAK_OPENAI_BASE_URL"),
            Provider::Anthropic => Some("PEAK_ANTHROPIC_BASE_URL"),
            Provider::Ollama => Some("PEAK_OLLAMA_BASE_URL"),
            Provider::OpenRouter | Provider::OpenAiCompat { .. } => None,
        }
    }

    /// The environment variable holding the key, and whether a key is required.
    pub fn key_env(&self) -> Option<(&'static str, bool)> {
        match self {
            Provider::OpenAi => Some(("OPENAI_API_KEY", true)),
            Provider::Anthropic => Some(("ANTHROPIC_API_KEY", true)),
            Provider::OpenRouter => Some(("OPENROUTER_API_KEY", true)),
            Provider::Ollama => None,
            Provider::OpenAiCompat { .. } => Some(("PEAK_COMPAT_API_KEY", false)),
        }
    }
}

/// A parsed `--executor` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutorSpec {
    Agent,
    Llm { provider: Provider, model: String },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid executor '{spec}': {message}")]
pub struct SpecError {
    pub spec: String,
    pub message: String,
}

const USAGE: &str = "expected `agent` or PROVIDER:MODEL with PROVIDER one of openai, anthropic, openrouter, ollama, or `openai-compat:BASE_URL:MODEL`";

impl FromStr for ExecutorSpec {
    type Err = SpecError;

    fn from_str(spec: &str) -> Result<Self, SpecError> {
        let error = |message: String| SpecError { spec: spec.to_string(), message };
        let spec = spec.trim();
        if spec == "agent" {
            return Ok(ExecutorSpec::Agent);
        }
        let Some((provider, rest)) = spec.split_once(':') else {
            return Err(error(USAGE.to_string()));
        };
        let provider = match provider {
            "openai" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            "openrouter" => Provider::OpenRouter,
            "ollama" => Provider::Ollama,
            "openai-compat" => {
                let (base_url, model) = split_compat(rest).map_err(error)?;
                return Ok(ExecutorSpec::Llm { provider: Provider::OpenAiCompat { base_url }, model });
            }
            other => return Err(error(format!("unknown provider '{other}'; {USAGE}"))),
        };
        if rest.trim().is_empty() {
            return Err(error(format!("no model after '{}:'", provider.name())));
        }
        Ok(ExecutorSpec::Llm { provider, model: rest.to_string() })
    }
}

/// `http://host:port/v1:model` -> (`http://host:port/v1`, `model`).
fn split_compat(rest: &str) -> Result<(String, String), String> {
    let scheme_end = ["http://", "https://"]
        .iter()
        .find(|s| rest.starts_with(**s))
        .map(|s| s.len())
        .ok_or_else(|| "openai-compat needs a base URL starting with http:// or https://, e.g. openai-compat:http://127.0.0.1:8000/v1:MODEL".to_string())?;
    let path_start = rest[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .ok_or_else(|| "give the base URL with its path, e.g. openai-compat:http://127.0.0.1:8000/v1:MODEL".to_string())?;
    let separator = rest[path_start..].find(':').map(|i| path_start + i).ok_or_else(|| "no model: write openai-compat:BASE_URL:MODEL".to_string())?;
    let (url, model) = (&rest[..separator], &rest[separator + 1..]);
    if model.trim().is_empty() {
        return Err("no model after the base URL".to_string());
    }
    Ok((url.to_string(), model.to_string()))
}

impl fmt::Display for ExecutorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecutorSpec::Agent => f.write_str("agent"),
            ExecutorSpec::Llm { provider: Provider::OpenAiCompat { base_url }, model } => write!(f, "openai-compat:{base_url}:{model}"),
            ExecutorSpec::Llm { provider, model } => write!(f, "{}:{model}", provider.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ExecutorSpec, SpecError> {
        s.parse()
    }

    #[test]
    fn providers_and_models_parse() {
        assert_eq!(parse("agent").unwrap(), ExecutorSpec::Agent);
        assert_eq!(parse("openai:gpt-4.1").unwrap(), ExecutorSpec::Llm { provider: Provider::OpenAi, model: "gpt-4.1".into() });
        assert_eq!(parse("ollama:qwen2.5-coder:7b").unwrap(), ExecutorSpec::Llm { provider: Provider::Ollama, model: "qwen2.5-coder:7b".into() });
        let compat = parse("openai-compat:http://127.0.0.1:8000/v1:Qwen/Qwen3-32B:fp8").unwrap();
        assert_eq!(
            compat,
            ExecutorSpec::Llm { provider: Provider::OpenAiCompat { base_url: "http://127.0.0.1:8000/v1".into() }, model: "Qwen/Qwen3-32B:fp8".into() }
        );
        assert_eq!(compat.to_string(), "openai-compat:http://127.0.0.1:8000/v1:Qwen/Qwen3-32B:fp8");
        assert_eq!(parse("anthropic:claude-sonnet-4-5").unwrap().to_string(), "anthropic:claude-sonnet-4-5");
    }

    #[test]
    fn bad_specs_say_what_is_expected() {
        for (spec, expect) in [
            ("gpt-4.1", "expected `agent`"),
            ("opneai:gpt-4.1", "unknown provider 'opneai'"),
            ("openai:", "no model"),
            ("openai-compat:127.0.0.1:8000:m", "http://"),
            ("openai-compat:http://127.0.0.1:8000:m", "with its path"),
            ("openai-compat:http://127.0.0.1:8000/v1", "no model"),
        ] {
            let err = parse(spec).unwrap_err().to_string();
            assert!(err.contains(expect) && err.contains(spec), "{spec}: {err}");
        }
    }
}
