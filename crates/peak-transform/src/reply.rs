//! Turning a model's reply into the new text of one region.
//!
//! The answer format asks for exactly one fenced code block. Models add "thinking"
//! (`<think>…</think>`, `<thinking>…</thinking>`) and prose around it, which is dropped;
//! what cannot be used unambiguously is a [`ReplyError`], an attempt outcome the
//! workflow records and the repair prompt feeds back, never a panic. Fences follow
//! CommonMark (``` or ~~~, three or more, closed by a fence at least as long), leniently
//! indented because models nest blocks in lists.

use peak_spec::{Region, Regions};

/// Why a reply cannot become the new region.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error("the reply has no fenced code block")]
    NoCodeBlock,
    #[error("the reply has {0} fenced code blocks; exactly one is expected")]
    MultipleCodeBlocks(usize),
    #[error("the reply's code block is never closed (was the reply cut off?)")]
    UnterminatedCodeBlock,
    #[error("the reply's code block is empty")]
    EmptyCodeBlock,
    #[error("the reply edits outside the {target} region: {reason}")]
    EditOutsideRegion { target: Region, reason: String },
    #[error("the answers leave every region exactly as it was: the transformation was not carried out")]
    Unchanged,
}

impl ReplyError {
    /// A stable, short name for records and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            ReplyError::NoCodeBlock => "no-code-block",
            ReplyError::MultipleCodeBlocks(_) => "multiple-code-blocks",
            ReplyError::UnterminatedCodeBlock => "unterminated-code-block",
            ReplyError::EmptyCodeBlock => "empty-code-block",
            ReplyError::EditOutsideRegion { .. } => "edit-outside-region",
            ReplyError::Unchanged => "unchanged",
        }
    }
}

/// The code of the single fenced block in `reply`, checked not to reach into the regions
/// other than `target` of `current`.
pub fn parse_reply(reply: &str, current: &Regions, target: Region) -> Result<String, ReplyError> {
    let visible = strip_thinking(reply);
    let blocks = code_blocks(&visible)?;
    let code = match blocks.as_slice() {
        [] => return Err(ReplyError::NoCodeBlock),
        [one] => one.clone(),
        many => return Err(ReplyError::MultipleCodeBlocks(many.len())),
    };
    if code.trim().is_empty() {
        return Err(ReplyError::EmptyCodeBlock);
    }
    check_inside(&code, current, target)?;
    Ok(code)
}

/// The reply without reasoning text. An opening tag never closed hides everything after
/// it; a closing tag never opened (some servers drop the opening one) hides everything
/// before it.
pub fn strip_thinking(reply: &str) -> String {
    let mut text = reply.to_string();
    for tag in ["think", "thinking"] {
        let open = format!("<{tag}>");
        let close = format!("</{tag}>");
        loop {
            let lower = text.to_ascii_lowercase();
            let open_at = lower.find(&open);
            let close_at = lower.find(&close);
            match (open_at, close_at) {
                (Some(o), Some(c)) if o < c => {
                    text.replace_range(o..c + close.len(), "");
                }
                (Some(o), None) => {
                    text.truncate(o);
                }
                (_, Some(c)) => {
                    text.replace_range(..c + close.len(), "");
                }
                (None, None) => break,
            }
        }
    }
    text
}

/// The contents of every fenced code block, in order.
fn code_blocks(text: &str) -> Result<Vec<String>, ReplyError> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(open) = Fence::opening(line) else { continue };
        let mut body = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if open.closes(line) {
                closed = true;
                break;
            }
            body.push_str(strip_indent(line, open.indent));
            body.push('\n');
        }
        if !closed {
            return Err(ReplyError::UnterminatedCodeBlock);
        }
        blocks.push(body);
    }
    Ok(blocks)
}

struct Fence {
    marker: char,
    len: usize,
    indent: usize,
}

impl Fence {
    fn opening(line: &str) -> Option<Fence> {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
        let len = trimmed.chars().take_while(|c| *c == marker).count();
        if len < 3 {
            return None;
        }
        // A backtick fence's info string cannot hold backticks (CommonMark); this keeps
        // inline code like ```` ```x``` ```` from opening a block.
        if marker == '`' && trimmed[len..].contains('`') {
            return None;
        }
        Some(Fence { marker, len, indent })
    }

    fn closes(&self, line: &str) -> bool {
        let trimmed = line.trim();
        trimmed.len() >= self.len && trimmed.chars().all(|c| c == self.marker)
    }
}

fn strip_indent(line: &str, indent: usize) -> &str {
    let spaces = line.chars().take(indent).take_while(|c| *c == ' ' || *c == '\t').count();
    &line[spaces..]
}

/// The lines of a region that identify it: non-blank, and more than bare punctuation, so
/// two regions that share a `}` are not mistaken for copies of each other.
fn significant_lines(text: &str) -> Vec<&str> {
    text.lines().map(str::trim).filter(|l| l.chars().filter(|c| c.is_alphanumeric()).count() >= 3).collect()
}

/// Letters and digits a region must have before a verbatim copy of it counts as an edit
/// outside the target region.
const MIN_DISTINCTIVE_CHARS: usize = 24;

fn check_inside(code: &str, current: &Regions, target: Region) -> Result<(), ReplyError> {
    if let Some(marker) = code.lines().map(str::trim).find(|l| l.starts_with("// @peak")) {
        return Err(ReplyError::EditOutsideRegion { target, reason: format!("it contains the region marker line `{marker}`") });
    }
    let reply_lines = significant_lines(code);
    for other in Region::ALL.into_iter().filter(|r| *r != target) {
        let other_lines = significant_lines(current.get(other));
        // Short regions (`#define X 1`) could coincide with legitimate code; a copy is only
        // called one when what was copied is distinctive.
        let distinctive = other_lines.iter().map(|l| l.chars().filter(|c| c.is_alphanumeric()).count()).sum::<usize>() >= MIN_DISTINCTIVE_CHARS;
        if !other_lines.is_empty() && distinctive && reply_lines.windows(other_lines.len()).any(|w| w == other_lines.as_slice()) {
            return Err(ReplyError::EditOutsideRegion { target, reason: format!("it repeats the whole {other} region") });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regions() -> Regions {
        Regions::new(
            "#define IDX(r, c, ld) ((r) * (ld) + (c))\n#define TX threadIdx.x\n",
            "__global__ void matmul(const float* A, const float* B, float* C, int n) {\n  C[0] = A[0] * B[0];\n}\n",
            "launch(\"matmul\", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);\n",
        )
    }

    fn parse(reply: &str) -> Result<String, ReplyError> {
        parse_reply(reply, &regions(), Region::Device)
    }

    #[test]
    fn one_block_with_prose_is_accepted() {
        let reply = "Here is the kernel:\n\n```cuda\n__global__ void k() {}\n```\nDone.";
        assert_eq!(parse(reply).unwrap(), "__global__ void k() {}\n");
    }

    #[test]
    fn thinking_is_stripped_including_its_code_blocks() {
        let reply = "<think>draft:\n```c\nint a;\n```\n</think>\n```c\nint b;\n```";
        assert_eq!(parse(reply).unwrap(), "int b;\n");
        let reply = "<THINKING>```c\nint a;\n```</THINKING>```c\nint b;\n```";
        assert_eq!(parse(reply).unwrap(), "int b;\n");
        // Opening tag dropped by the server: everything before the close is reasoning.
        let reply = "```c\nint a;\n```\n</think>\n```c\nint b;\n```";
        assert_eq!(parse(reply).unwrap(), "int b;\n");
        // Never closed: everything after the tag is reasoning.
        assert_eq!(parse("```c\nint b;\n```\n<think>```c\nint a;\n```").unwrap(), "int b;\n");
    }

    #[test]
    fn zero_or_several_blocks_are_typed_outcomes() {
        assert_eq!(parse("no code at all"), Err(ReplyError::NoCodeBlock));
        assert_eq!(parse("<think>```c\nint a;\n```</think>"), Err(ReplyError::NoCodeBlock));
        assert_eq!(parse("```c\nint a;\n```\nand\n```c\nint b;\n```"), Err(ReplyError::MultipleCodeBlocks(2)));
        assert_eq!(parse("```c\nint a;\n"), Err(ReplyError::UnterminatedCodeBlock));
        assert_eq!(parse("```c\n\n```"), Err(ReplyError::EmptyCodeBlock));
    }

    #[test]
    fn fences_follow_commonmark() {
        // A longer fence holds a shorter one; tildes work; the indent of a nested fence is removed.
        assert_eq!(parse("````md\n```c\nx\n```\n````").unwrap(), "```c\nx\n```\n");
        assert_eq!(parse("~~~\nint x;\n~~~").unwrap(), "int x;\n");
        assert_eq!(parse("1. code:\n   ```c\n   int x;\n     y;\n   ```").unwrap(), "int x;\n  y;\n");
        // Inline triple backticks do not open a block.
        assert_eq!(parse("```x``` is inline\n```c\nint x;\n```").unwrap(), "int x;\n");
    }

    #[test]
    fn markers_and_copied_regions_are_edits_outside() {
        let err = parse("```c\n// @peak device\nint x;\n```").unwrap_err();
        assert_eq!(err.kind(), "edit-outside-region");
        assert!(err.to_string().contains("// @peak device"), "{err}");

        let copied = "```c\n#define IDX(r, c, ld) ((r) * (ld) + (c))\n#define TX threadIdx.x\n__global__ void k() {}\n```";
        let err = parse(copied).unwrap_err();
        assert!(err.to_string().contains("macros region"), "{err}");

        // A one-line region counts when it is distinctive: here the whole launch script.
        let err =
            parse("```c\n__global__ void k() {}\nlaunch(\"matmul\", [ceil_div(n, BLOCK_X), ceil_div(n, BLOCK_Y)], [BLOCK_X, BLOCK_Y], 0, A, B, C, n);\n```")
                .unwrap_err();
        assert!(err.to_string().contains("host region"), "{err}");
        // A short one (`#define X 1`) would not be: regions below the threshold are never matched.
        let short = Regions::new("#define X 1\n", "", "");
        assert!(parse_reply("```c\n#define X 1\nint y;\n```", &short, Region::Device).is_ok());

        // Using a macro of another region is not copying it.
        assert!(parse("```c\n__global__ void k() { int i = IDX(1, 2, 3); }\n```").is_ok());
    }
}
