//! Playing a recorded transcript back.
//!
//! Responses are returned in recorded order, and each must be for the pass and attempt
//! being asked for: when the replayed run takes a different path (an attempt that failed
//! in the recording succeeds here, or the reverse) the replay stops with
//! [`ExecutorError::ReplayDiverged`] instead of feeding a response to the wrong prompt.
//! Prompts are not compared: a replay on another backend asks with that backend's
//! translation table, yet the recorded code is what is being reproduced.

use std::sync::Mutex;

use super::{BoxFuture, Executor, ExecutorError, Outcome, PassRequest, Response, Transcript};

#[derive(Debug)]
pub struct ReplayExecutor {
    transcript: Transcript,
    next: Mutex<usize>,
}

impl ReplayExecutor {
    pub fn new(transcript: Transcript) -> Self {
        ReplayExecutor { transcript, next: Mutex::new(0) }
    }

    fn next_response(&self, request: &PassRequest) -> Result<Outcome, ExecutorError> {
        // A poisoned lock only means another replay call panicked; the index is still valid.
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let entry = self.transcript.entries.get(*next).ok_or(ExecutorError::ReplayExhausted {
            pass: request.pass,
            attempt: request.attempt,
            recorded: self.transcript.entries.len(),
        })?;
        if (entry.pass, entry.attempt) != (request.pass, request.attempt) {
            return Err(ExecutorError::ReplayDiverged {
                pass: request.pass,
                attempt: request.attempt,
                recorded_pass: entry.pass,
                recorded_attempt: entry.attempt,
            });
        }
        *next += 1;
        Ok(Outcome::Reply(Response {
            producer: entry.producer.clone(),
            text: entry.response.clone(),
            tokens_in: entry.tokens_in,
            tokens_out: entry.tokens_out,
            latency_ms: entry.latency_ms,
        }))
    }
}

impl Executor for ReplayExecutor {
    fn producer(&self) -> String {
        let mut producers: Vec<&str> = self.transcript.entries.iter().map(|e| e.producer.as_str()).collect();
        producers.sort_unstable();
        producers.dedup();
        if producers.is_empty() { "replay".to_string() } else { producers.join(", ") }
    }

    fn execute<'a>(&'a self, request: &'a PassRequest) -> BoxFuture<'a, Result<Outcome, ExecutorError>> {
        Box::pin(async move { self.next_response(request) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::TranscriptEntry;

    fn entry(pass: usize, attempt: u32, response: &str) -> TranscriptEntry {
        TranscriptEntry {
            pass,
            attempt,
            producer: "gpt-4.1".into(),
            prompt: "p".into(),
            response: response.into(),
            tokens_in: Some(10),
            tokens_out: Some(5),
            latency_ms: 100,
        }
    }

    fn request(pass: usize, attempt: u32) -> PassRequest {
        PassRequest { transformation: "T".into(), pass, attempt, prompt: "different prompt".into() }
    }

    #[tokio::test]
    async fn replays_in_order_and_stops_on_divergence_or_end() {
        let replay = ReplayExecutor::new(Transcript { entries: vec![entry(1, 1, "a"), entry(1, 2, "b"), entry(2, 1, "c")] });
        assert_eq!(replay.producer(), "gpt-4.1");
        let Outcome::Reply(r) = replay.execute(&request(1, 1)).await.unwrap() else { panic!("expected a reply") };
        assert_eq!((r.text.as_str(), r.producer.as_str(), r.tokens_in), ("a", "gpt-4.1", Some(10)));

        let err = replay.execute(&request(2, 1)).await.unwrap_err();
        assert!(matches!(err, ExecutorError::ReplayDiverged { recorded_pass: 1, recorded_attempt: 2, .. }), "{err}");

        // The divergent request consumed nothing.
        let Outcome::Reply(r) = replay.execute(&request(1, 2)).await.unwrap() else { panic!("expected a reply") };
        assert_eq!(r.text, "b");
        replay.execute(&request(2, 1)).await.unwrap();
        let err = replay.execute(&request(3, 1)).await.unwrap_err();
        assert!(matches!(err, ExecutorError::ReplayExhausted { recorded: 3, .. }), "{err}");
    }
}
