//! Where in the expression text a node is: the parser records each node's byte offset, and
//! compile errors report it as a 1-based line and a column counted in characters.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, SourceInfo};

use crate::error::CompileError;

/// 1-based line and column (in characters) of byte `offset` in `src`.
pub(crate) fn line_col(src: &str, offset: usize) -> (u32, u32) {
    let mut end = offset.min(src.len());
    while !src.is_char_boundary(end) {
        end -= 1;
    }
    let before = &src[..end];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (saturate(line), saturate(column))
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub(crate) fn error_at(src: &str, offset: usize, message: impl Into<String>) -> CompileError {
    let (line, column) = line_col(src, offset);
    CompileError {
        line,
        column,
        message: message.into(),
    }
}

pub(crate) struct Locator<'s> {
    src: &'s str,
    info: &'s SourceInfo,
}

impl<'s> Locator<'s> {
    pub(crate) fn new(src: &'s str, info: &'s SourceInfo) -> Self {
        Locator { src, info }
    }

    fn offset_of(&self, id: u64) -> Option<usize> {
        self.info.offset_for(id).map(|(start, _)| start as usize)
    }

    fn offset(&self, id: u64) -> usize {
        self.offset_of(id).unwrap_or(0)
    }

    /// An error at node `id`.
    pub(crate) fn error(&self, id: u64, message: impl Into<String>) -> CompileError {
        error_at(self.src, self.offset(id), message)
    }

    /// An error at where the expression `e` starts (its leftmost node): an argument or an
    /// operand reads best from its beginning, not from the operator inside it.
    pub(crate) fn expr_error(&self, e: &IdedExpr, message: impl Into<String>) -> CompileError {
        error_at(self.src, self.start_of(e), message)
    }

    fn start_of(&self, e: &IdedExpr) -> usize {
        let mut start = usize::MAX;
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            if let Some(offset) = self.offset_of(e.id) {
                start = start.min(offset);
            }
            match &e.expr {
                Expr::Call(c) => {
                    stack.extend(c.target.as_deref());
                    stack.extend(&c.args);
                }
                Expr::Select(s) => stack.push(&s.operand),
                Expr::Comprehension(c) => stack.push(&c.iter_range),
                Expr::List(l) => stack.extend(l.elements.first()),
                Expr::Map(m) => {
                    if let Some(EntryExpr::MapEntry(entry)) = m.entries.first().map(|x| &x.expr) {
                        stack.push(&entry.key);
                    }
                }
                _ => {}
            }
        }
        if start == usize::MAX { 0 } else { start }
    }

    /// An error at the call (or macro) `id`. The parser places a call at its `(`; the
    /// function's name just before it is where a reader looks.
    pub(crate) fn call_error(&self, id: u64, message: impl Into<String>) -> CompileError {
        let paren = self.offset(id);
        let at = match self.src.get(..paren) {
            Some(before) if self.src[paren..].starts_with('(') => {
                let trimmed = before.trim_end();
                let name = trimmed
                    .bytes()
                    .rev()
                    .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    .count();
                if name == 0 {
                    paren
                } else {
                    trimmed.len() - name
                }
            }
            _ => paren,
        };
        error_at(self.src, at, message)
    }
}
