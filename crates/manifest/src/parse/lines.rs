//! Byte offset -> line and column.

/// A 1-based line and column. Columns count Unicode scalar values (characters), not bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct LineCol {
    /// Line, starting at 1.
    pub line: usize,
    /// Column in characters, starting at 1.
    pub column: usize,
}

/// Bytes per block of the character-count table of non-ASCII texts.
const BLOCK: usize = 1024;

/// The start offset of every line of a text, for turning byte offsets into [`LineCol`]s.
///
/// Locating is O(log lines + [`BLOCK`]) whatever the line length, so a minified manifest with many findings
/// on one long line is not quadratic: in ASCII text a column is a byte distance; otherwise a table of how
/// many characters precede each block of the text leaves at most one block to count.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<usize>,
    /// Characters before byte `i * BLOCK`, for `i` in `0..=len / BLOCK`; empty for ASCII text.
    chars_before_block: Vec<usize>,
}

impl LineIndex {
    /// Index `text`. A line ends after `\n`, or after a `\r` not followed by `\n` (old Mac line
    /// endings, which JSON allows as whitespace and editors show as line breaks); a `\r` before a
    /// `\n` belongs to the line.
    pub fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        starts.extend(
            bytes
                .iter()
                .enumerate()
                .filter(|&(i, b)| *b == b'\n' || (*b == b'\r' && bytes.get(i + 1) != Some(&b'\n')))
                .map(|(i, _)| i + 1),
        );
        let mut chars_before_block = Vec::new();
        if !text.is_ascii() {
            let mut count = 0;
            chars_before_block.reserve(text.len() / BLOCK + 1);
            for block in text.as_bytes().chunks(BLOCK) {
                chars_before_block.push(count);
                count += char_starts(block);
            }
            chars_before_block.push(count);
        }
        Self {
            starts,
            chars_before_block,
        }
    }

    /// Where `offset` is. Offsets past the end or inside a character are clamped to the nearest
    /// character boundary before them.
    pub fn locate(&self, text: &str, offset: usize) -> LineCol {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let line_index = self
            .starts
            .partition_point(|&start| start <= offset)
            .saturating_sub(1);
        let line_start = self.starts.get(line_index).copied().unwrap_or(0);
        let column = self.chars_between(text, line_start, offset) + 1;
        LineCol {
            line: line_index + 1,
            column,
        }
    }

    /// How many characters `text[from..to]` has (`from <= to`, both character boundaries).
    fn chars_between(&self, text: &str, from: usize, to: usize) -> usize {
        if self.chars_before_block.is_empty() {
            return to.saturating_sub(from); // ASCII: one byte per character
        }
        match (self.chars_before(text, from), self.chars_before(text, to)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            // `text` is not the indexed text; count directly.
            _ => text.get(from..to).map_or(0, |s| s.chars().count()),
        }
    }

    /// How many characters precede byte `offset` (a character boundary) of the indexed non-ASCII text.
    fn chars_before(&self, text: &str, offset: usize) -> Option<usize> {
        let block = offset / BLOCK;
        let before = *self.chars_before_block.get(block)?;
        let rest = text.as_bytes().get(block * BLOCK..offset)?;
        Some(before + char_starts(rest))
    }

    /// The byte offset where 1-based `line` starts.
    pub fn line_start(&self, line: usize) -> Option<usize> {
        self.starts.get(line.checked_sub(1)?).copied()
    }

    /// The text of 1-based `line` without its line ending.
    pub fn line_text<'t>(&self, text: &'t str, line: usize) -> &'t str {
        let Some(&start) = line.checked_sub(1).and_then(|i| self.starts.get(i)) else {
            return "";
        };
        let end = self.starts.get(line).map_or(text.len(), |&next| next);
        text.get(start..end.max(start))
            .unwrap_or("")
            .trim_end_matches(['\n', '\r'])
    }

    /// How many lines the text has.
    pub fn line_count(&self) -> usize {
        self.starts.len()
    }
}

/// How many characters start in `bytes` (bytes that are not UTF-8 continuation bytes).
fn char_starts(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count()
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}
