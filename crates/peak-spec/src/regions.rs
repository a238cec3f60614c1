//! The three-region source file.
//!
//! A context's source is one file split by marker lines into macros, device code and host
//! code, in that order. Markers are `//` comments so the file stays valid for the device
//! compiler (C-like languages) and for the Rhai host script alike:
//!
//! ```text
//! // @peak macros
//! #define IDX(r, c, ld) ((r) * (ld) + (c))
//! // @peak device
//! __kernel void matmul(...) { ... }
//! // @peak host
//! launch("matmul", [n / BLOCK_X, n / BLOCK_Y], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);
//! ```
//!
//! Each region's text is kept byte-for-byte, so `render(parse(text)) == text` for every
//! well-formed file, and replacing one region can never touch the other two.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

/// One of the three editable parts of a kernel context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Region {
    Macros,
    Device,
    Host,
}

impl Region {
    pub const ALL: [Region; 3] = [Region::Macros, Region::Device, Region::Host];

    pub fn name(self) -> &'static str {
        match self {
            Region::Macros => "macros",
            Region::Device => "device",
            Region::Host => "host",
        }
    }

    /// The marker line that opens this region.
    pub fn marker(self) -> String {
        format!("{MARKER_PREFIX}{}", self.name())
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Region {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "macros" => Ok(Region::Macros),
            "device" => Ok(Region::Device),
            "host" => Ok(Region::Host),
            other => Err(format!("unknown region '{other}': expected macros, device or host")),
        }
    }
}

const MARKER_PREFIX: &str = "// @peak ";

/// A parsed source file: the text of each region, without its marker line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Regions {
    texts: [String; 3],
    /// 1-based line number of each region's first content line in the file, so errors
    /// from a compiler or the script engine can be reported against the whole file.
    first_lines: [usize; 3],
}

impl Regions {
    /// Parse a source file. `file` is only used to name the file in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, SpecError> {
        let mut texts: [String; 3] = Default::default();
        let mut first_lines = [0usize; 3];
        let mut current: Option<usize> = None;
        for (line_idx, line) in text.split_inclusive('\n').enumerate() {
            let line_no = line_idx + 1;
            let trimmed = line.trim_end_matches(['\n', '\r']);
            if let Some(name) = trimmed.strip_prefix(MARKER_PREFIX) {
                let region: Region = name.trim().parse().map_err(|msg| SpecError::Source { file: file.to_string(), line: line_no, message: msg })?;
                let idx = region as usize;
                let expected = current.map_or(0, |c| c + 1);
                if idx != expected {
                    return Err(SpecError::Source {
                        file: file.to_string(),
                        line: line_no,
                        message: format!(
                            "region marker '{}' is out of order: expected '{}' here (regions must appear as macros, device, host, once each)",
                            region.marker(),
                            Region::ALL.get(expected).map_or_else(|| "end of file".to_string(), |r| r.marker()),
                        ),
                    });
                }
                current = Some(idx);
                first_lines[idx] = line_no + 1;
                continue;
            }
            match current {
                Some(idx) => texts[idx].push_str(line),
                None if trimmed.trim().is_empty() => {
                    return Err(SpecError::Source {
                        file: file.to_string(),
                        line: line_no,
                        message: format!("blank line before the first marker; the file must start with '{}'", Region::Macros.marker()),
                    });
                }
                None => {
                    return Err(SpecError::Source {
                        file: file.to_string(),
                        line: line_no,
                        message: format!("text before the first region marker; the file must start with '{}'", Region::Macros.marker()),
                    });
                }
            }
        }
        let found = current.map_or(0, |c| c + 1);
        if found < 3 {
            let missing = Region::ALL[found];
            return Err(SpecError::Source {
                file: file.to_string(),
                line: text.lines().count().max(1),
                message: format!("missing region marker '{}' (every source needs macros, device and host regions)", missing.marker()),
            });
        }
        Ok(Regions { texts, first_lines })
    }

    /// Build a source from three region texts.
    pub fn new(macros: impl Into<String>, device: impl Into<String>, host: impl Into<String>) -> Self {
        let mut regions = Regions { texts: [macros.into(), device.into(), host.into()], first_lines: [0; 3] };
        regions.renumber();
        regions
    }

    /// The kernels the launch script runs: the names its `launch("name", ...)` calls give,
    /// commented-out calls left out.
    pub fn launched_kernels(&self) -> std::collections::BTreeSet<String> {
        let host = self.get(Region::Host);
        let masked = crate::import::scan::mask(host);
        let starts_word = |at: usize| !masked[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        masked
            .match_indices("launch(")
            .filter(|(at, _)| starts_word(*at))
            .filter_map(|(at, call)| {
                let name = host[at + call.len()..].trim_start().strip_prefix('"')?;
                Some(name[..name.find('"')?].to_string())
            })
            .collect()
    }

    pub fn get(&self, region: Region) -> &str {
        &self.texts[region as usize]
    }

    /// Replace one region; the other two are untouched by construction.
    pub fn replace(&mut self, region: Region, text: impl Into<String>) {
        let mut text = text.into();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        self.texts[region as usize] = text;
        self.renumber();
    }

    /// 1-based line in the whole file where the region's text starts.
    pub fn first_line(&self, region: Region) -> usize {
        self.first_lines[region as usize]
    }

    /// The code the device compiler sees: macros then device code. Line numbers in the
    /// compiled text match the file's up to the device marker, which is kept as a comment.
    pub fn device_source(&self) -> String {
        let mut out = String::new();
        out.push_str(&Region::Macros.marker());
        out.push('\n');
        out.push_str(self.get(Region::Macros));
        out.push_str(&Region::Device.marker());
        out.push('\n');
        out.push_str(self.get(Region::Device));
        out
    }

    /// The whole file, byte-identical to what was parsed when nothing was replaced.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for region in Region::ALL {
            out.push_str(&region.marker());
            out.push('\n');
            out.push_str(self.get(region));
        }
        out
    }

    fn renumber(&mut self) {
        let mut line = 1;
        for region in Region::ALL {
            line += 1; // the marker
            self.first_lines[region as usize] = line;
            line += self.texts[region as usize].matches('\n').count();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "// @peak macros\n#define X 1\n// @peak device\nkernel void k() {}\n\n// @peak host\nlaunch(\"k\", 1, 1, 0);\n";

    #[test]
    fn parse_render_round_trip_is_byte_identical() {
        let regions = Regions::parse("k.cl", SAMPLE).unwrap();
        assert_eq!(regions.get(Region::Macros), "#define X 1\n");
        assert_eq!(regions.get(Region::Device), "kernel void k() {}\n\n");
        assert_eq!(regions.render(), SAMPLE);
        assert_eq!(regions.first_line(Region::Host), 7);
    }

    #[test]
    fn replacing_one_region_leaves_the_others() {
        let mut regions = Regions::parse("k.cl", SAMPLE).unwrap();
        regions.replace(Region::Device, "kernel void k2() {}");
        assert_eq!(regions.get(Region::Macros), "#define X 1\n");
        assert_eq!(regions.get(Region::Host), "launch(\"k\", 1, 1, 0);\n");
        assert_eq!(regions.first_line(Region::Host), 6);
        let reparsed = Regions::parse("k.cl", &regions.render()).unwrap();
        assert_eq!(reparsed, regions);
    }

    #[test]
    fn missing_marker_names_file_and_marker() {
        let err = Regions::parse("k.cl", "// @peak macros\n// @peak device\nx\n").unwrap_err().to_string();
        assert!(err.contains("k.cl"), "{err}");
        assert!(err.contains("// @peak host"), "{err}");
    }

    #[test]
    fn out_of_order_and_stray_text_are_errors() {
        let err = Regions::parse("k.cl", "// @peak device\n").unwrap_err().to_string();
        assert!(err.contains("k.cl:1"), "{err}");
        let err = Regions::parse("k.cl", "int x;\n// @peak macros\n").unwrap_err().to_string();
        assert!(err.contains("before the first region marker"), "{err}");
    }
}
