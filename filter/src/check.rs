//! Compilation: size limits on the text, parsing with the `cel` crate (used for nothing
//! else), limits on the parsed tree, then type checking and lowering (`lower`) to the
//! program the evaluator runs, and the check of the result type against the program's kind.

use std::thread;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::parser::{ParseError, Parser};

use crate::error::CompileError;
use crate::ir::{Compiled, Kind};
use crate::limits::{MAX_AST_DEPTH, MAX_DEPTH, MAX_NODES, MAX_SOURCE_BYTES};
use crate::lower::Lower;
use crate::pos::{Locator, error_at, line_col};
use crate::types::Ty;

/// Stack for the compiling thread. The ANTLR parser recurses through a dozen rules per
/// nesting level: at the depth limit it was measured using 5.7 MiB in a debug build, more
/// than the 2 MiB of a tokio worker or test thread. The stack is reserved, not committed:
/// only what the parse touches becomes memory.
const COMPILE_STACK_BYTES: usize = 64 << 20;

pub(crate) fn compile(src: &str, kind: Kind) -> Result<Compiled, CompileError> {
    if src.len() > MAX_SOURCE_BYTES {
        return Err(error_at(
            src,
            MAX_SOURCE_BYTES,
            format!(
                "the expression is {} bytes long, more than {MAX_SOURCE_BYTES}",
                src.len()
            ),
        ));
    }
    // A thread of its own also drops the parse tree and AST (as deep as the parse) on its
    // big stack, and turns a panic in the parser into a refused expression rather than a
    // failed config load.
    thread::scope(|scope| {
        let worker = thread::Builder::new()
            .name("ankusa-filter-compile".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, || compile_here(src, kind));
        match worker {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(error_at(src, 0, "the parser failed on this expression"))),
            Err(e) => Err(error_at(
                src,
                0,
                format!("cannot start the compiling thread: {e}"),
            )),
        }
    })
}

fn compile_here(src: &str, kind: Kind) -> Result<Compiled, CompileError> {
    let (ast, info) = Parser::new()
        .max_recursion_depth(MAX_DEPTH)
        .parse_with_source_info(src)
        .map_err(|errors| match errors.errors.first() {
            Some(e) => parse_error(src, e),
            None => error_at(src, 0, "the expression does not parse"),
        })?;
    let (nodes, depth) = measure(&ast);
    if nodes > MAX_NODES {
        return Err(error_at(
            src,
            0,
            format!("the expression has more than {MAX_NODES} nodes after macro expansion"),
        ));
    }
    if depth > MAX_AST_DEPTH {
        return Err(error_at(
            src,
            0,
            format!("the expression nests more than {MAX_AST_DEPTH} levels deep"),
        ));
    }
    let loc = Locator::new(src, &info);
    let mut lower = Lower::new(&loc);
    let (root, ty) = lower.expr(&ast)?;
    check_result(kind, &ty).map_err(|m| loc.expr_error(&ast, m))?;
    Ok(Compiled {
        root,
        slots: lower.max_slots,
        reads_body: lower.reads_body,
    })
}

fn parse_error(src: &str, e: &ParseError) -> CompileError {
    let message = e.msg.trim();
    let (line, column) = match (u32::try_from(e.pos.0), u32::try_from(e.pos.1)) {
        (Ok(line), Ok(column)) if line > 0 && column > 0 => (line, column),
        _ => line_col(src, 0),
    };
    // The depth limit reaches the error listener as a debug dump of the inner error.
    if message.contains("Recursion limit") {
        return CompileError {
            line,
            column,
            message: format!("the expression nests more than {MAX_DEPTH} levels deep"),
        };
    }
    let message = message.strip_prefix("Syntax error: ").unwrap_or(message);
    CompileError {
        line,
        column,
        message: format!("syntax error: {message}"),
    }
}

/// Node count and depth of the parsed tree, walked without recursion: the tree may be deep
/// (`a.b.b.b...`) and is only bounded after this.
fn measure(root: &IdedExpr) -> (usize, usize) {
    let mut nodes = 0;
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, depth)) = stack.pop() {
        nodes += 1;
        deepest = deepest.max(depth);
        if nodes > MAX_NODES {
            break;
        }
        let mut push = |child| stack.push((child, depth + 1));
        match &e.expr {
            Expr::Call(c) => {
                if let Some(t) = &c.target {
                    push(t);
                }
                c.args.iter().for_each(&mut push);
            }
            Expr::Comprehension(c) => {
                for child in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    push(child);
                }
            }
            Expr::List(l) => l.elements.iter().for_each(&mut push),
            Expr::Map(m) => m
                .entries
                .iter()
                .for_each(|entry| entry_children(entry, &mut push)),
            Expr::Struct(s) => s
                .entries
                .iter()
                .for_each(|entry| entry_children(entry, &mut push)),
            Expr::Select(s) => push(&s.operand),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
    (nodes, deepest)
}

fn entry_children<'e>(
    entry: &'e cel::common::ast::IdedEntryExpr,
    push: &mut impl FnMut(&'e IdedExpr),
) {
    match &entry.expr {
        EntryExpr::MapEntry(m) => {
            push(&m.key);
            push(&m.value);
        }
        EntryExpr::StructField(f) => push(&f.value),
    }
}

fn check_result(kind: Kind, ty: &Ty) -> Result<(), String> {
    match kind {
        Kind::Filter if matches!(ty, Ty::Bool | Ty::Dyn) => Ok(()),
        Kind::Filter => Err(format!("a filter must produce a bool, this produces {ty}")),
        Kind::Headers => match ty {
            Ty::Dyn => Ok(()),
            Ty::Map(k, v) if k.stringy() && v.stringy() => Ok(()),
            _ => Err(format!(
                "headers must be a map(string, string), this produces {ty}"
            )),
        },
        Kind::Value => Ok(()),
    }
}
