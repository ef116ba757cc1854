//! Expressions refused at compile time, each with the line and column it is refused at.

use super::compile_error;
use crate::{Kind, MAX_DEPTH, MAX_NODES, MAX_SOURCE_BYTES, Program};

#[track_caller]
fn refused(src: &str, kind: Kind, line: u32, column: u32, message: &str) {
    let e = compile_error(src, kind);
    assert_eq!((e.line, e.column), (line, column), "`{src}`: {e}");
    assert!(e.message.contains(message), "`{src}`: {e}");
}

#[test]
fn unknown_identifier() {
    refused(
        r#"body.type == foo"#,
        Kind::Filter,
        1,
        14,
        "unknown identifier `foo`; the activation has body, headers, source, tenant, verification, received_at, size",
    );
    refused(
        "body.a == 1 &&\n   bar.b == 2",
        Kind::Filter,
        2,
        4,
        "unknown identifier `bar`",
    );
    // A macro's variable is in scope inside the macro only.
    refused(
        "body.l.exists(x, x > 1) && x > 2",
        Kind::Filter,
        1,
        28,
        "unknown identifier `x`",
    );
}

#[test]
fn unknown_function() {
    refused("nope(1)", Kind::Filter, 1, 1, "unknown function `nope`");
    refused(
        "body.type.frobnicate()",
        Kind::Filter,
        1,
        11,
        "unknown function `frobnicate`",
    );
    refused(
        "body.l.reduce(x, 1)",
        Kind::Value,
        1,
        8,
        "unknown function `reduce`",
    );
}

#[test]
fn wrong_arity_and_receiver() {
    refused(
        r#""a".contains()"#,
        Kind::Filter,
        1,
        5,
        "write s.contains(t)",
    );
    refused("size(1, 2)", Kind::Value, 1, 1, "write size(x) or x.size()");
    refused(
        "body.l.map(x)",
        Kind::Value,
        1,
        8,
        "write list.map(x, expr)",
    );
    refused(
        r#"contains("ab", "a")"#,
        Kind::Filter,
        1,
        1,
        "write s.contains(t)",
    );
    refused(
        r#"size.startsWith("a")"#,
        Kind::Filter,
        1,
        6,
        "`startsWith` does not apply to int",
    );
    refused(
        "source.x",
        Kind::Value,
        1,
        7,
        "`.x` selects a field of a map, this is string",
    );
    refused(
        "has(tenant.x)",
        Kind::Filter,
        1,
        1,
        "has() tests a field of a map",
    );
    refused(
        r#"source.startsWith(1)"#,
        Kind::Filter,
        1,
        19,
        "`startsWith` takes a string, not int",
    );
    refused(
        "int([1])",
        Kind::Value,
        1,
        5,
        "`int` cannot convert list(int)",
    );
}

#[test]
fn incompatible_operands() {
    refused(
        r#"size + "a""#,
        Kind::Value,
        1,
        6,
        "`+` does not apply to int and string",
    );
    refused(
        r#"size < "a""#,
        Kind::Filter,
        1,
        6,
        "`<` does not apply to int and string",
    );
    refused(
        r#"tenant - "a""#,
        Kind::Value,
        1,
        8,
        "`-` does not apply to string and string",
    );
    refused("!size", Kind::Filter, 1, 1, "`!` does not apply to int");
    refused(
        "size && true",
        Kind::Filter,
        1,
        6,
        "`&&` does not apply to int and bool",
    );
    refused(
        r#"headers[1]"#,
        Kind::Value,
        1,
        8,
        "indexed by string, not int",
    );
    refused(
        r#"1 in "abc""#,
        Kind::Filter,
        1,
        3,
        "`in` needs a list or a map",
    );
    refused(
        r#"{[1]: 2}"#,
        Kind::Value,
        1,
        2,
        "a map key must be a string, int, uint or bool",
    );
}

#[test]
fn result_kind() {
    refused(
        r#"body.type + "x""#,
        Kind::Filter,
        1,
        1,
        "a filter must produce a bool, this produces string",
    );
    refused(r#"  [1, 2]"#, Kind::Filter, 1, 3, "this produces list(int)");
    refused(
        r#""x""#,
        Kind::Headers,
        1,
        1,
        "headers must be a map(string, string), this produces string",
    );
    refused(
        r#"{"x-n": 1}"#,
        Kind::Headers,
        1,
        1,
        "this produces map(string, int)",
    );
    assert!(Program::compile(r#"{"x-a": body.a}"#, Kind::Headers).is_ok());
    assert!(Program::compile("body.flag", Kind::Filter).is_ok());
}

#[test]
fn regex_patterns() {
    refused(
        "body.s.matches(body.p)",
        Kind::Filter,
        1,
        16,
        "the pattern of matches() must be a string literal",
    );
    refused(
        r#"matches(body.s, tenant)"#,
        Kind::Filter,
        1,
        17,
        "must be a string literal",
    );
    refused(
        r#"body.s.matches("(")"#,
        Kind::Filter,
        1,
        16,
        "invalid regular expression",
    );
    refused(
        r#"body.s.matches("\\w{1000}{1000}")"#,
        Kind::Filter,
        1,
        16,
        "the regular expression compiles to more than 1048576 bytes",
    );
    assert!(Program::compile(r#"matches(body.s, "^a+$")"#, Kind::Filter).is_ok());
}

#[test]
fn syntax_errors() {
    refused(r#"body.type =="#, Kind::Filter, 1, 13, "syntax error");
    refused("body.type ==\n  (1 +", Kind::Filter, 2, 7, "syntax error");
    refused(r#"body.?x"#, Kind::Value, 1, 5, "syntax error");
    refused(
        "has(body)",
        Kind::Filter,
        1,
        5,
        "invalid argument to has() macro",
    );
    refused(
        "body.l.all(1, true)",
        Kind::Filter,
        1,
        12,
        "argument must be a simple name",
    );
    refused("Foo{a: 1}", Kind::Value, 1, 4, "message literals");
    refused("", Kind::Value, 1, 1, "syntax error");
}

#[test]
fn source_too_long() {
    let src = format!("{} == 1", "1 + ".repeat(MAX_SOURCE_BYTES / 4));
    let e = compile_error(&src, Kind::Filter);
    assert_eq!((e.line, e.column), (1, MAX_SOURCE_BYTES as u32 + 1), "{e}");
    assert!(e.message.contains("more than 4096"), "{e}");
    // Lines and characters, not bytes: the first byte past the limit is on line 3.
    let line = format!("{}\n", "é".repeat(1000));
    let src = line.repeat(3);
    let e = compile_error(&src, Kind::Value);
    assert_eq!((e.line, e.column), (3, 48), "{e}");
}

#[test]
fn too_many_nodes() {
    let ones = vec!["1"; MAX_NODES].join(",");
    let e = compile_error(&format!("[{ones}]"), Kind::Value);
    assert_eq!((e.line, e.column), (1, 1), "{e}");
    assert!(e.message.contains("more than 512 nodes"), "{e}");
    // One fewer element fits: the list node plus 511 literals.
    let ones = vec!["1"; MAX_NODES - 1].join(",");
    assert!(Program::compile(&format!("[{ones}]"), Kind::Value).is_ok());
}

#[test]
fn nesting_too_deep() {
    let depth = usize::from(MAX_DEPTH) + 8;
    let src = format!("{}1{} == 1", "(".repeat(depth), ")".repeat(depth));
    let e = compile_error(&src, Kind::Filter);
    assert!(e.message.contains("nests more than 32 levels deep"), "{e}");
    assert_eq!((e.line, e.column), (1, 34), "{e}");
    let ok = 20;
    let src = format!("{}1{} == 1", "(".repeat(ok), ")".repeat(ok));
    assert!(Program::compile(&src, Kind::Filter).is_ok());
    // A long select chain is not parser recursion; the tree depth limit catches it.
    let src = format!("body{}", ".a".repeat(200));
    let e = compile_error(&src, Kind::Value);
    assert!(e.message.contains("nests more than 128 levels deep"), "{e}");
}

#[test]
fn macros_nested_too_deep() {
    let src = "[1].map(a, [2].map(b, [3].map(c, a + b + c)))";
    refused(src, Kind::Value, 1, 27, "macros nest more than 2 deep");
    assert!(Program::compile("[1].map(a, [2].map(b, a + b))", Kind::Value).is_ok());
    // A macro on a macro's result is not nested in its body.
    assert!(
        Program::compile(
            "[1].map(a, a).map(b, b).map(c, c).exists(d, d > 0)",
            Kind::Filter
        )
        .is_ok()
    );
    refused(
        "body.a.all(x, x.b.exists(y, y.c.exists_one(z, z)))",
        Kind::Filter,
        1,
        33,
        "macros nest more than 2 deep",
    );
}
