//! Positions in a YAML text: [`At`] (byte offset, 1-based line and column in characters) and
//! `Locator`, which turns a parser's (line, column) marks into byte offsets. Shared by the budget
//! check (`limits`) and the path index (`position`); it imports neither, so they form no cycle.

/// Where in a text a limit was hit: byte offset, 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// Byte offset.
    pub offset: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

/// Turns the parser's (line, column) marks into byte offsets in time proportional to the distance
/// between consecutive marks (they move forward through the text, with small steps back), not to
/// the offset: a table of line starts and a cursor on the last position.
pub(crate) struct Locator<'a> {
    text: &'a str,
    /// Byte offset of each line's start (line breaks: LF, CRLF, lone CR, as YAML counts them).
    starts: Vec<usize>,
    line: usize,
    column: usize,
    offset: usize,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let b = text.as_bytes();
        let mut starts = vec![0];
        for (i, &c) in b.iter().enumerate() {
            if c == b'\n' || (c == b'\r' && b.get(i + 1) != Some(&b'\n')) {
                starts.push(i + 1);
            }
        }
        Locator {
            text,
            starts,
            line: 1,
            column: 1,
            offset: 0,
        }
    }

    fn is_break(&self, off: usize) -> bool {
        matches!(self.text.as_bytes().get(off), Some(b'\n' | b'\r') | None)
    }

    /// The byte offset of 1-based `line`, `column` (characters), clamped to the line and the text.
    pub(crate) fn at(&mut self, line: usize, column: usize) -> At {
        let line = line.clamp(1, self.starts.len());
        let column = column.max(1);
        if line != self.line {
            self.line = line;
            self.column = 1;
            self.offset = self.starts[line - 1];
        }
        while self.column < column && !self.is_break(self.offset) {
            let step = self.text[self.offset..]
                .chars()
                .next()
                .map_or(1, char::len_utf8);
            self.offset += step;
            self.column += 1;
        }
        while self.column > column {
            self.offset -= 1;
            while !self.text.is_char_boundary(self.offset) {
                self.offset -= 1;
            }
            self.column -= 1;
        }
        At {
            offset: self.offset,
            line,
            column: self.column,
        }
    }
}
