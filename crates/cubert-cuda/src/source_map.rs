//! From an NVRTC error back to the code it is about.
//!
//! NVRTC names lines of the compiled file (`saxpy.cu(12): error: ...`), which is the
//! kernel's source after the prelude (`compile_cuda` restarts the numbering there). A user
//! never sees that file, so [`annotate`] appends to the log, for every line an error names,
//! the text of that line and, for kernels of the language, the line of the Rust source it
//! was generated from: the generator prints a [`RUST_LINE`] comment before the code of
//! each Rust statement.

use std::collections::BTreeSet;
use std::fmt::Write;

/// The start of the comment the language's generator prints before each statement's code,
/// followed by `file:line`.
pub const RUST_LINE: &str = "// rust: ";

/// The lines of `file` (`name.cu`) that `log` reports on, in order.
fn reported_lines(file: &str, log: &str) -> BTreeSet<usize> {
    let pattern = format!("{file}(");
    let mut lines = BTreeSet::new();
    for (at, _) in log.match_indices(&pattern) {
        let rest = &log[at + pattern.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if rest[digits.len()..].starts_with(')')
            && let Ok(line) = digits.parse::<usize>()
        {
            lines.insert(line);
        }
    }
    lines
}

/// `log` (NVRTC's, for kernel `name` compiled from `source`) followed by the source line
/// of each line it reports on, and the Rust line it came from where the source notes one.
pub fn annotate(name: &str, source: &str, log: &str) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let mut out = log.trim_end().to_string();
    for number in reported_lines(&format!("{name}.cu"), log) {
        let Some(text) = number.checked_sub(1).and_then(|index| lines.get(index)) else {
            continue;
        };
        let _ = write!(out, "\n{name}.cu line {number}: `{}`", text.trim());
        let rust = lines[..number - 1]
            .iter()
            .rev()
            .find_map(|line| line.trim().strip_prefix(RUST_LINE));
        if let Some(rust) = rust {
            let _ = write!(
                out,
                "\n    generated from the kernel's Rust source at {rust}"
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_their_generated_line_and_the_rust_line_before_it() {
        let source = "extern \"C\" __global__ void k() {\n\
                      // rust: src/kernels.rs:10\n\
                      int a = 1;\n\
                      // rust: src/kernels.rs:11\n\
                      a = b;\n\
                      }\n";
        let log = "k.cu(5): error: identifier \"b\" is undefined\n\n1 error detected\n";
        let annotated = annotate("k", source, log);
        assert!(annotated.starts_with(log.trim_end()), "{annotated}");
        assert!(annotated.contains("k.cu line 5: `a = b;`"), "{annotated}");
        assert!(
            annotated.contains("generated from the kernel's Rust source at src/kernels.rs:11"),
            "{annotated}"
        );
    }

    #[test]
    fn lines_outside_the_source_or_other_files_are_left_alone() {
        let log = "k.cu(99): error: x\nprelude.cuh(3): warning: y\nk.cu(x): z";
        assert_eq!(annotate("k", "int a;\n", log), log);
        let plain = "k.cu(1): error: expected a \";\"";
        assert_eq!(
            annotate("k", "int a\n", plain),
            format!("{plain}\nk.cu line 1: `int a`")
        );
    }
}
