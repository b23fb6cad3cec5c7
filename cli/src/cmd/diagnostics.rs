//! Spec diagnostics printed for people: each once on stderr, located and rendered by miette with its
//! source line. Shared by `validate`, `convert` and `profile`, so that no command imports another.

use std::io::IsTerminal;

use clusterctl_spec::Diagnostic;

/// Prints each diagnostic once on stderr, graphically (its location, then miette's rendering with
/// the source line).
pub(crate) fn print_graphical(items: &[Diagnostic]) {
    let theme = if std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        miette::GraphicalTheme::unicode()
    } else {
        miette::GraphicalTheme::unicode_nocolor()
    };
    let handler = miette::GraphicalReportHandler::new_themed(theme).with_context_lines(1);
    for d in items {
        let mut out = String::new();
        // Rendering into a String cannot fail except on a formatter error; fall back to the plain line.
        if handler.render_report(&mut out, d).is_err() {
            out = format!("{d}\n");
        }
        eprintln!("{}: {}", d.location(), first_line(&out));
        eprint!("{}", rest_lines(&out));
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("").trim()
}

fn rest_lines(s: &str) -> String {
    let mut lines = s.lines();
    lines.next();
    let mut out: String = lines.map(|l| format!("{l}\n")).collect();
    out.push('\n');
    out
}
