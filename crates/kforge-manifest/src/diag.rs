//! Diagnostics for kernel projects: one `Problem` per mistake, with the file, a source span, what was
//! expected and how to fix it; `ProjectError` collects every problem of one project.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{Diagnostic, LabeledSpan, NamedSource, Severity, SourceCode};

/// One mistake (or warning) in a kernel project.
#[derive(Debug, Clone)]
pub struct Problem {
    /// What is wrong, e.g. "unknown key `nmae` in [general]".
    pub message: String,
    /// The file it is in (as given to `load_project`, joined with the file name).
    pub file: PathBuf,
    /// 1-based line and column of the span start, when the problem has a place in the file.
    pub line_col: Option<(usize, usize)>,
    /// How to fix it.
    pub help: Option<String>,
    pub severity: Severity,
    /// A stable machine-readable code, e.g. `manifest::unknown-key`.
    pub code: &'static str,
    label: String,
    span: Option<(usize, usize)>,
    source: Option<NamedSource<Arc<String>>>,
}

impl Problem {
    /// A problem that has no place in a file (missing file, unreadable directory).
    pub fn new(code: &'static str, file: &Path, message: impl Into<String>) -> Self {
        Problem {
            message: message.into(),
            file: file.to_path_buf(),
            line_col: None,
            help: None,
            severity: Severity::Error,
            code,
            label: String::new(),
            span: None,
            source: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }

    /// Attach the offending byte range of `source` with a short label shown under it.
    pub fn at(
        mut self,
        source: &Arc<String>,
        span: std::ops::Range<usize>,
        label: impl Into<String>,
    ) -> Self {
        let start = span.start.min(source.len());
        let end = span.end.clamp(start, source.len());
        self.line_col = Some(line_col(source, start));
        self.span = Some((start, end - start));
        self.label = label.into();
        self.source = Some(NamedSource::new(
            self.file.display().to_string(),
            Arc::clone(source),
        ));
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `file:line:col` (or just `file`).
    pub fn location(&self) -> String {
        match self.line_col {
            Some((l, c)) => format!("{}:{l}:{c}", self.file.display()),
            None => self.file.display().to_string(),
        }
    }

    /// One line: `file:line:col: message (help: ...)`.
    pub fn summary(&self) -> String {
        let kind = if self.is_error() { "error" } else { "warning" };
        match &self.help {
            Some(h) => format!("{}: {kind}: {} (help: {h})", self.location(), self.message),
            None => format!("{}: {kind}: {}", self.location(), self.message),
        }
    }
}

/// 1-based (line, column) of a byte offset; the column counts characters.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl Diagnostic for Problem {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }
    fn severity(&self) -> Option<Severity> {
        Some(self.severity)
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        self.source.as_ref().map(|s| s as &dyn SourceCode)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let (start, len) = self.span?;
        let label = (!self.label.is_empty()).then(|| self.label.clone());
        Some(Box::new(std::iter::once(LabeledSpan::new(
            label, start, len,
        ))))
    }
}

/// Every problem found in one kernel project. `Display` gives a readable `file:line:col` summary;
/// as a `miette::Diagnostic` each problem is a related diagnostic with its source snippet.
#[derive(Debug, Clone)]
pub struct ProjectError {
    /// The project directory as given.
    pub dir: PathBuf,
    /// Errors first, in file order; warnings found on the way are kept too.
    pub problems: Vec<Problem>,
}

impl ProjectError {
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.is_error())
    }
}

impl fmt::Display for ProjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors().count();
        write!(
            f,
            "kernel project {} has {n} error{}",
            self.dir.display(),
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  {}", p.summary())?;
        }
        Ok(())
    }
}

impl std::error::Error for ProjectError {}

impl Diagnostic for ProjectError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("kforge::check"))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        Some(Box::new(self.problems.iter().map(|p| p as &dyn Diagnostic)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let src = "a = 1\nbé = 2\n";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 6), (2, 1));
        // `=` after a two-byte character is the fourth character of line 2.
        assert_eq!(line_col(src, 10), (2, 4));
        assert_eq!(line_col(src, 999), (3, 1));
    }

    #[test]
    fn summary_names_file_line_and_help() {
        let src = Arc::new("[general]\nnmae = \"x\"\n".to_string());
        let p = Problem::new(
            "manifest::unknown-key",
            Path::new("k/build.toml"),
            "unknown key `nmae`",
        )
        .at(&src, 10..14, "not a key of [general]")
        .with_help("did you mean `name`?");
        assert_eq!(
            p.summary(),
            "k/build.toml:2:1: error: unknown key `nmae` (help: did you mean `name`?)"
        );
    }
}
