//! Byte offset -> line and column.

/// A 1-based line and column. Columns count Unicode scalar values (characters), not bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct LineCol {
    /// Line, starting at 1.
    pub line: usize,
    /// Column in characters, starting at 1.
    pub column: usize,
}

/// The start offset of every line of a text, for turning byte offsets into [`LineCol`]s.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    /// Index `text`. A line ends after `\n`; a `\r` before it belongs to the line.
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Self { starts }
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
        let column = text.get(line_start..offset).map_or(0, |s| s.chars().count()) + 1;
        LineCol {
            line: line_index + 1,
            column,
        }
    }

    /// The text of 1-based `line` without its line ending.
    pub fn line_text<'t>(&self, text: &'t str, line: usize) -> &'t str {
        let Some(&start) = line.checked_sub(1).and_then(|i| self.starts.get(i)) else {
            return "";
        };
        let end = self
            .starts
            .get(line)
            .map_or(text.len(), |&next| next.saturating_sub(1));
        text.get(start..end.max(start))
            .unwrap_or("")
            .trim_end_matches('\r')
    }

    /// How many lines the text has.
    pub fn line_count(&self) -> usize {
        self.starts.len()
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}
