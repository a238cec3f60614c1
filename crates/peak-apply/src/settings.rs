//! The settings of the commands that validate, sanitize and tune: declared once, nested by
//! concern, and built once per command from its surface (CLI flags, MCP parameters).
//!
//! `ApplyOptions` carries them, and the apply in progress (`state.json`) serialises them.
//! Their serialised form is flat with the field names state files have always had
//! (`samples`, `sanitize`, `sanitize_samples`, `sanitize_winner`, `sanitize_at`, `seed`,
//! `budget`, `time_limit_s`, `set`, `library_dirs`, `cache_dir`), so an apply started by an
//! older peak resumes; the sanitizer's fields default where a file predates them.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Sanitize;

/// How candidates are validated, sanitized and tuned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Execution parameters sampled for validation.
    pub samples: usize,
    /// Seed of the validation sample, the inputs and the search.
    pub seed: u64,
    #[serde(flatten)]
    pub sanitizer: SanitizerSettings,
    #[serde(flatten)]
    pub tuning: TuningSettings,
    /// `NAME=VALUE` restrictions of validation and tuning (e.g. one input size). The input
    /// sizes the workflow was created at (`init --set`) fill in the names this leaves out.
    pub set: Vec<String>,
    /// Extra transformation folders layered over the built-in library.
    pub library_dirs: Vec<PathBuf>,
    /// Results and reference caches (default: `peak_eval::default_cache_dir()`).
    pub cache_dir: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            samples: 16,
            seed: 1,
            sanitizer: SanitizerSettings::default(),
            tuning: TuningSettings::default(),
            set: Vec::new(),
            library_dirs: Vec::new(),
            cache_dir: None,
        }
    }
}

/// compute-sanitizer on validation samples and on the tuned winner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SanitizerSettings {
    /// The tools: `auto`, `none` or a list.
    #[serde(rename = "sanitize", default)]
    pub tools: Sanitize,
    /// Validation samples the sanitizer runs on (at most `Settings::samples`, at small inputs).
    #[serde(rename = "sanitize_samples", default = "default_sanitize_samples")]
    pub samples: usize,
    /// Sanitize the tuned winner before recording it, falling back along the top-K.
    #[serde(rename = "sanitize_winner", default = "default_sanitize_winner")]
    pub winner: bool,
    /// `NAME=VALUE` input sizes the sanitizer runs at where a configuration is valid there
    /// (smaller than the manifest's: a sanitized run is 10 to 1000 times slower).
    #[serde(rename = "sanitize_at", default)]
    pub at: Vec<String>,
}

impl Default for SanitizerSettings {
    fn default() -> Self {
        // The paper sanitized 16 samples too.
        SanitizerSettings { tools: Sanitize::Auto, samples: default_sanitize_samples(), winner: default_sanitize_winner(), at: Vec::new() }
    }
}

fn default_sanitize_samples() -> usize {
    16
}

fn default_sanitize_winner() -> bool {
    true
}

/// How far the search goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TuningSettings {
    /// Evaluations per input configuration (`None`: the whole space).
    pub budget: Option<usize>,
    /// Seconds of search per input configuration.
    #[serde(rename = "time_limit_s", with = "seconds", default)]
    pub time_limit: Option<Duration>,
}

/// A duration as seconds (f64), the unit state files have always used.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
        value.map(|d| d.as_secs_f64()).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
        let seconds = Option::<f64>::deserialize(deserializer)?;
        seconds.map(|s| Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_serialise_flat_under_the_names_state_files_use() {
        let settings = Settings {
            sanitizer: SanitizerSettings { tools: "memcheck".parse().unwrap(), samples: 3, winner: false, at: vec!["n=64".into()] },
            tuning: TuningSettings { budget: Some(8), time_limit: Some(Duration::from_millis(1500)) },
            ..Settings::default()
        };
        let json = serde_json::to_value(&settings).unwrap();
        for (key, value) in [
            ("samples", serde_json::json!(16)),
            ("seed", serde_json::json!(1)),
            ("sanitize", serde_json::json!("memcheck")),
            ("sanitize_samples", serde_json::json!(3)),
            ("sanitize_winner", serde_json::json!(false)),
            ("sanitize_at", serde_json::json!(["n=64"])),
            ("budget", serde_json::json!(8)),
            ("time_limit_s", serde_json::json!(1.5)),
        ] {
            assert_eq!(json[key], value, "{key} in {json}");
        }
        assert_eq!(serde_json::from_value::<Settings>(json).unwrap(), settings);
    }

    #[test]
    fn a_file_without_the_sanitizer_fields_reads_with_their_defaults() {
        let old = serde_json::json!({"samples": 4, "seed": 2, "budget": null, "time_limit_s": null, "set": [], "library_dirs": [], "cache_dir": null});
        let settings: Settings = serde_json::from_value(old).unwrap();
        assert_eq!(settings.sanitizer, SanitizerSettings::default());
        assert_eq!((settings.samples, settings.seed), (4, 2));
    }

    #[test]
    fn a_negative_time_limit_is_refused() {
        let bad = serde_json::json!({"samples": 4, "seed": 2, "budget": null, "time_limit_s": -1.0, "set": [], "library_dirs": [], "cache_dir": null});
        assert!(serde_json::from_value::<Settings>(bad).is_err());
    }
}
