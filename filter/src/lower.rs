//! Type checking and lowering: walks the parsed tree (its depth already bounded by
//! `check`), refuses what is unknown, unsupported or certain to fail, and builds the `ir`
//! tree. Each refusal is a `CompileError` at the node it concerns.

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue,
    SelectExpr, operators,
};
use regex::{Regex, RegexBuilder};

use crate::error::CompileError;
use crate::ir::{BinOp, Comprehension, Lit, Node, UnOp, Var};
use crate::limits::{MAX_COMPREHENSION_NESTING, MAX_REGEX_BYTES, REGEX_WEIGHT_UNIT};
use crate::pos::Locator;
use crate::types::{self, CallError, Ty};

const ACTIVATION: &str = "body, headers, source, tenant, verification, received_at, size";

type Lowered = (Node, Ty);

/// A macro variable in scope; its slot is its index in `Lower::scopes`.
struct Scope {
    name: String,
    ty: Ty,
    /// The accumulator the macro expansions name `@result` (users cannot spell it).
    accu: bool,
}

pub(crate) struct Lower<'s> {
    loc: &'s Locator<'s>,
    scopes: Vec<Scope>,
    /// How many macro bodies enclose the node being lowered.
    nesting: usize,
    pub(crate) max_slots: usize,
    pub(crate) reads_body: bool,
}

impl<'s> Lower<'s> {
    pub(crate) fn new(loc: &'s Locator<'s>) -> Self {
        Lower {
            loc,
            scopes: Vec::new(),
            nesting: 0,
            max_slots: 0,
            reads_body: false,
        }
    }

    pub(crate) fn expr(&mut self, e: &IdedExpr) -> Result<Lowered, CompileError> {
        match &e.expr {
            Expr::Literal(l) => Ok(literal(l)),
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::List(l) => {
                if !l.optional_indices.is_empty() {
                    return Err(self
                        .loc
                        .error(e.id, "optional list elements are not supported"));
                }
                let mut nodes = Vec::with_capacity(l.elements.len());
                let mut tys = Vec::with_capacity(l.elements.len());
                for element in &l.elements {
                    let (node, ty) = self.expr(element)?;
                    nodes.push(node);
                    tys.push(ty);
                }
                Ok((Node::List(nodes), Ty::list(types::join_all(tys.iter()))))
            }
            Expr::Map(m) => self.map(&m.entries),
            Expr::Struct(_) => Err(self.loc.error(
                e.id,
                "message literals (`Name{field: ...}`) are not supported; write a map literal",
            )),
            Expr::Select(s) => self.select(e.id, s),
            Expr::Call(c) => self.call(e.id, c),
            Expr::Comprehension(c) => self.comprehension(e.id, c),
            Expr::Unspecified => Err(self.loc.error(e.id, "unsupported expression")),
        }
    }

    fn lookup(&self, name: &str) -> Option<(usize, &Scope)> {
        self.scopes
            .iter()
            .enumerate()
            .rev()
            .find(|(_, s)| s.name == name)
    }

    fn ident(&mut self, id: u64, name: &str) -> Result<Lowered, CompileError> {
        if let Some((slot, scope)) = self.lookup(name) {
            return Ok((Node::Local(slot), scope.ty.clone()));
        }
        let (var, ty) = match name {
            "body" => {
                self.reads_body = true;
                (Var::Body, Ty::Dyn)
            }
            "headers" => (Var::Headers, Ty::map(Ty::String, Ty::String)),
            "source" => (Var::Source, Ty::String),
            "tenant" => (Var::Tenant, Ty::String),
            "verification" => (Var::Verification, Ty::String),
            "received_at" => (Var::ReceivedAt, Ty::Int),
            "size" => (Var::Size, Ty::Int),
            _ => {
                return Err(self.loc.error(
                    id,
                    format!("unknown identifier `{name}`; the activation has {ACTIVATION}"),
                ));
            }
        };
        Ok((Node::Var(var), ty))
    }

    fn map(&mut self, entries: &[IdedEntryExpr]) -> Result<Lowered, CompileError> {
        let mut out = Vec::with_capacity(entries.len());
        let mut key_tys = Vec::with_capacity(entries.len());
        let mut value_tys = Vec::with_capacity(entries.len());
        for entry in entries {
            let m = match &entry.expr {
                EntryExpr::MapEntry(m) if !m.optional => m,
                EntryExpr::MapEntry(_) => {
                    return Err(self
                        .loc
                        .error(entry.id, "optional map entries are not supported"));
                }
                EntryExpr::StructField(_) => {
                    return Err(self.loc.error(entry.id, "message fields are not supported"));
                }
            };
            let (key, key_ty) = self.expr(&m.key)?;
            if !types::key_type(&key_ty) {
                return Err(self.loc.expr_error(
                    &m.key,
                    format!("a map key must be a string, int, uint or bool, this is {key_ty}"),
                ));
            }
            let (value, value_ty) = self.expr(&m.value)?;
            out.push((key, value));
            key_tys.push(key_ty);
            value_tys.push(value_ty);
        }
        let ty = Ty::map(
            types::join_all(key_tys.iter()),
            types::join_all(value_tys.iter()),
        );
        Ok((Node::Map(out), ty))
    }

    fn select(&mut self, id: u64, s: &SelectExpr) -> Result<Lowered, CompileError> {
        let (operand, ty) = self.expr(&s.operand)?;
        let out = types::select(&ty, &s.field, s.test).map_err(|m| {
            if s.test {
                self.loc.call_error(id, m)
            } else {
                self.loc.error(id, m)
            }
        })?;
        let node = Node::Select {
            operand: Box::new(operand),
            field: s.field.as_str().into(),
            test: s.test,
        };
        Ok((node, out))
    }

    fn call(&mut self, id: u64, c: &CallExpr) -> Result<Lowered, CompileError> {
        if c.target.is_some() {
            return self.function(id, c);
        }
        let name = c.func_name.as_str();
        match (name, c.args.as_slice()) {
            (operators::CONDITIONAL, [cond, yes, no]) => {
                let (cond, cond_ty) = self.expr(cond)?;
                let (yes, yes_ty) = self.expr(yes)?;
                let (no, no_ty) = self.expr(no)?;
                let ty = types::conditional(&cond_ty, &yes_ty, &no_ty)
                    .map_err(|m| self.loc.error(id, m))?;
                Ok((Node::Cond(Box::new(cond), Box::new(yes), Box::new(no)), ty))
            }
            (operators::LOGICAL_AND, [l, r]) => self.logic(id, true, l, r),
            (operators::LOGICAL_OR, [l, r]) => self.logic(id, false, l, r),
            (operators::LOGICAL_NOT, [x]) => self.unary(id, UnOp::Not, x),
            (operators::NEGATE, [x]) => self.unary(id, UnOp::Neg, x),
            (operators::NOT_STRICTLY_FALSE, [x]) => self.unary(id, UnOp::NotStrictlyFalse, x),
            (operators::INDEX, [container, index]) => {
                let (container, container_ty) = self.expr(container)?;
                let (index, index_ty) = self.expr(index)?;
                let ty =
                    types::index(&container_ty, &index_ty).map_err(|m| self.loc.error(id, m))?;
                Ok((Node::Index(Box::new(container), Box::new(index)), ty))
            }
            (_, [l, r]) => match binop(name) {
                Some(BinOp::Add) => match self.append(l, r)? {
                    Some(lowered) => Ok(lowered),
                    None => self.binary(id, BinOp::Add, l, r),
                },
                Some(op) => self.binary(id, op, l, r),
                None => self.function(id, c),
            },
            _ => self.function(id, c),
        }
    }

    fn logic(
        &mut self,
        id: u64,
        and: bool,
        l: &IdedExpr,
        r: &IdedExpr,
    ) -> Result<Lowered, CompileError> {
        let (l, l_ty) = self.expr(l)?;
        let (r, r_ty) = self.expr(r)?;
        let op = if and { "&&" } else { "||" };
        let ty = types::logic(op, &l_ty, &r_ty).map_err(|m| self.loc.error(id, m))?;
        let (l, r) = (Box::new(l), Box::new(r));
        Ok((if and { Node::And(l, r) } else { Node::Or(l, r) }, ty))
    }

    fn unary(&mut self, id: u64, op: UnOp, x: &IdedExpr) -> Result<Lowered, CompileError> {
        let (x, x_ty) = self.expr(x)?;
        let ty = types::unary(op, &x_ty).map_err(|m| self.loc.error(id, m))?;
        Ok((Node::Unary(op, Box::new(x)), ty))
    }

    fn binary(
        &mut self,
        id: u64,
        op: BinOp,
        l: &IdedExpr,
        r: &IdedExpr,
    ) -> Result<Lowered, CompileError> {
        let (l, l_ty) = self.expr(l)?;
        let (r, r_ty) = self.expr(r)?;
        let ty = types::binary(op, &l_ty, &r_ty).map_err(|m| self.loc.error(id, m))?;
        Ok((Node::Binary(op, Box::new(l), Box::new(r)), ty))
    }

    /// `@result + [x]`, the step of the `map` and `filter` expansions, as an in-place append.
    fn append(&mut self, l: &IdedExpr, r: &IdedExpr) -> Result<Option<Lowered>, CompileError> {
        let Expr::Ident(name) = &l.expr else {
            return Ok(None);
        };
        let Some((accu, scope)) = self.lookup(name) else {
            return Ok(None);
        };
        if !scope.accu || !matches!(scope.ty, Ty::List(_) | Ty::Dyn) {
            return Ok(None);
        }
        let Expr::List(list) = &r.expr else {
            return Ok(None);
        };
        let ([element], true) = (list.elements.as_slice(), list.optional_indices.is_empty()) else {
            return Ok(None);
        };
        let (elem, _) = self.expr(element)?;
        let node = Node::Append {
            accu,
            elem: Box::new(elem),
        };
        Ok(Some((node, Ty::list(Ty::Dyn))))
    }

    fn function(&mut self, id: u64, c: &CallExpr) -> Result<Lowered, CompileError> {
        let name = c.func_name.as_str();
        if types::usage(name).is_none() {
            return Err(self
                .loc
                .call_error(id, format!("unknown function `{name}`")));
        }
        if name == "matches" {
            return self.matches(id, c);
        }
        // The parser expands every well-formed macro call; one that reaches here is
        // misshapen, and its arguments (macro variables) would only confuse the message.
        if matches!(
            name,
            "has" | "all" | "exists" | "exists_one" | "existsOne" | "map" | "filter"
        ) {
            let how = types::usage(name).unwrap_or_default();
            return Err(self
                .loc
                .call_error(id, format!("`{name}` is not called like this; write {how}")));
        }
        let mut nodes = Vec::with_capacity(c.args.len() + 1);
        let recv_ty = match &c.target {
            Some(target) => {
                let (node, ty) = self.expr(target)?;
                nodes.push(node);
                Some(ty)
            }
            None => None,
        };
        let mut arg_tys = Vec::with_capacity(c.args.len());
        for arg in &c.args {
            let (node, ty) = self.expr(arg)?;
            nodes.push(node);
            arg_tys.push(ty);
        }
        match types::function(name, recv_ty.as_ref(), &arg_tys) {
            Ok((func, ty)) => Ok((Node::Call(func, nodes), ty)),
            Err(CallError::Call(m)) => Err(self.loc.call_error(id, m)),
            Err(CallError::Arg(i, m)) => Err(match c.args.get(i) {
                Some(arg) => self.loc.expr_error(arg, m),
                None => self.loc.call_error(id, m),
            }),
        }
    }

    fn matches(&mut self, id: u64, c: &CallExpr) -> Result<Lowered, CompileError> {
        let (subject, pattern) = match (&c.target, c.args.as_slice()) {
            (Some(target), [pattern]) => (&**target, pattern),
            (None, [subject, pattern]) => (subject, pattern),
            _ => {
                let how = types::usage("matches").unwrap_or_default();
                return Err(self.loc.call_error(id, format!("write {how}")));
            }
        };
        let (subject, subject_ty) = self.expr(subject)?;
        if !subject_ty.stringy() {
            return Err(self
                .loc
                .call_error(id, format!("`matches` does not apply to {subject_ty}")));
        }
        let Expr::Literal(LiteralValue::String(text)) = &pattern.expr else {
            return Err(self.loc.expr_error(
                pattern,
                "the pattern of matches() must be a string literal: it is compiled once, when the expression loads",
            ));
        };
        let regex = compile_regex(text.inner()).map_err(|m| self.loc.error(pattern.id, m))?;
        let node = Node::Matches {
            subject: Box::new(subject),
            regex,
            weight: regex_weight(text.inner()),
        };
        Ok((node, Ty::Bool))
    }

    fn comprehension(&mut self, id: u64, c: &ComprehensionExpr) -> Result<Lowered, CompileError> {
        if c.iter_var2.is_some() {
            return Err(self
                .loc
                .call_error(id, "two-variable macros are not supported"));
        }
        if self.nesting >= MAX_COMPREHENSION_NESTING {
            return Err(self.loc.call_error(
                id,
                format!(
                    "macros nest more than {MAX_COMPREHENSION_NESTING} deep (a macro inside a macro inside a macro)"
                ),
            ));
        }
        let (range, range_ty) = self.expr(&c.iter_range)?;
        let elem_ty = types::iter_elem(&range_ty).map_err(|m| self.loc.call_error(id, m))?;
        let (init, init_ty) = self.expr(&c.accu_init)?;
        let accu = self.scopes.len();
        self.scopes.push(Scope {
            name: c.accu_var.clone(),
            ty: init_ty.clone(),
            accu: true,
        });
        self.scopes.push(Scope {
            name: c.iter_var.clone(),
            ty: elem_ty,
            accu: false,
        });
        self.max_slots = self.max_slots.max(self.scopes.len());
        self.nesting += 1;
        let body = self.body(c, accu, &init_ty);
        self.nesting -= 1;
        self.scopes.truncate(accu);
        let (cond, step, result, ty) = body?;
        let node = Comprehension {
            range,
            iter: accu + 1,
            accu,
            init,
            cond,
            step,
            result,
        };
        Ok((Node::Comprehension(Box::new(node)), ty))
    }

    fn body(
        &mut self,
        c: &ComprehensionExpr,
        accu: usize,
        init_ty: &Ty,
    ) -> Result<(Node, Node, Node, Ty), CompileError> {
        let (cond, _) = self.expr(&c.loop_cond)?;
        let (step, step_ty) = self.expr(&c.loop_step)?;
        // The result sees the accumulator after any number of steps.
        let accu_ty = types::join(init_ty, &step_ty);
        if let Some(scope) = self.scopes.get_mut(accu) {
            scope.ty = accu_ty;
        }
        let (result, ty) = self.expr(&c.result)?;
        Ok((cond, step, result, ty))
    }
}

fn binop(name: &str) -> Option<BinOp> {
    Some(match name {
        operators::ADD => BinOp::Add,
        operators::SUBSTRACT => BinOp::Sub,
        operators::MULTIPLY => BinOp::Mul,
        operators::DIVIDE => BinOp::Div,
        operators::MODULO => BinOp::Rem,
        operators::EQUALS => BinOp::Eq,
        operators::NOT_EQUALS => BinOp::Ne,
        operators::LESS => BinOp::Lt,
        operators::LESS_EQUALS => BinOp::Le,
        operators::GREATER => BinOp::Gt,
        operators::GREATER_EQUALS => BinOp::Ge,
        operators::IN => BinOp::In,
        _ => return None,
    })
}

fn literal(l: &LiteralValue) -> Lowered {
    match l {
        LiteralValue::Null => (Node::Lit(Lit::Null), Ty::Null),
        LiteralValue::Boolean(b) => (Node::Lit(Lit::Bool(*b.inner())), Ty::Bool),
        LiteralValue::Int(i) => (Node::Lit(Lit::Int(*i.inner())), Ty::Int),
        LiteralValue::UInt(u) => (Node::Lit(Lit::Uint(*u.inner())), Ty::Uint),
        LiteralValue::Double(d) => (Node::Lit(Lit::Double(*d.inner())), Ty::Double),
        LiteralValue::String(s) => (Node::Lit(Lit::Str(s.inner().into())), Ty::String),
        LiteralValue::Bytes(b) => (Node::Lit(Lit::Bytes(b.inner().into())), Ty::Bytes),
    }
}

/// Compiles a `matches()` pattern. The regex crate matches in time linear in the input, so
/// the patterns that backtrack exponentially elsewhere are harmless; the limits bound the
/// compiled program and the lazy DFA's cache, i.e. compile time and memory.
fn compile_regex(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .dfa_size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => {
                format!("the regular expression compiles to more than {limit} bytes")
            }
            regex::Error::Syntax(text) => {
                let detail = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("error: "))
                    .unwrap_or("syntax error");
                format!("invalid regular expression: {detail}")
            }
            other => format!("invalid regular expression: {other}"),
        })
}

/// The cost weight of scanning with `pattern` (which compiles under `MAX_REGEX_BYTES`):
/// 1 up to `REGEX_WEIGHT_UNIT` of compiled size, doubling with each doubling of the size.
/// `regex` does not report a program's size, so it is bracketed by compiling under
/// growing size limits; a failed compile stops as soon as it passes its limit.
fn regex_weight(pattern: &str) -> u64 {
    let mut limit = REGEX_WEIGHT_UNIT;
    let mut weight = 1;
    while limit < MAX_REGEX_BYTES
        && RegexBuilder::new(pattern)
            .size_limit(limit)
            .build()
            .is_err()
    {
        limit *= 2;
        weight *= 2;
    }
    weight
}
