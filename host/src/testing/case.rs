//! [`TestCase`]: one `#[vigil::test]` function as the attribute registers
//! it, and [`TestOutcome`], what its body may return.

use crate::api::context::Context;
use crate::error::ErrorReport;
use std::cell::Cell;
use std::fmt::Display;

/// What a test body's run came to: `Err` holds the failure's message.
pub type Outcome = Result<(), String>;

/// A registered test (the attribute's expansion builds one per function).
#[derive(Debug)]
pub struct TestCase {
    /// The function's name.
    pub name: &'static str,
    /// `module_path!()` where it is declared.
    pub module: &'static str,
    /// `file!()` where it is declared.
    pub file: &'static str,
    /// `line!()` of the attribute.
    pub line: u32,
    /// Whether it runs on the CPU backend.
    pub cpu: bool,
    /// Whether it runs on each GPU.
    pub gpu: bool,
    /// Whether its context has the sanitizer on.
    pub sanitize: bool,
    /// The function, its result made an [`Outcome`].
    pub body: fn(&Context) -> Outcome,
}

inventory::collect!(TestCase);

impl TestCase {
    /// Every registered test of this binary, sorted by path.
    pub(crate) fn all() -> Vec<&'static TestCase> {
        let mut cases: Vec<&'static TestCase> = inventory::iter::<TestCase>.into_iter().collect();
        cases.sort_by_key(|c| (c.path(), c.line));
        cases
    }

    /// `module::name`, without the crate's own name (as libtest names tests).
    pub(crate) fn path(&self) -> String {
        match self.module.split_once("::") {
            Some((_, inner)) => format!("{inner}::{}", self.name),
            None => self.name.to_owned(),
        }
    }
}

/// What a `#[vigil::test]` function may return: `()` (fail by panicking)
/// or a `Result` whose error says what went wrong (its `Display` text; an
/// error type's causes are added by the attribute's expansion).
pub trait TestOutcome {
    /// The result as an [`Outcome`].
    fn into_outcome(self) -> Outcome;
}

impl TestOutcome for () {
    fn into_outcome(self) -> Outcome {
        Ok(())
    }
}

impl<E: Display> TestOutcome for Result<(), E> {
    fn into_outcome(self) -> Outcome {
        self.map_err(|e| e.to_string())
    }
}

/// A test body's return value on its way to an [`Outcome`]. The
/// `#[vigil::test]` expansion calls `(&&Returned::new(value)).outcome()`
/// with both traits below in scope; method lookup then takes
/// [`WithCauses`] when the error converts into an [`ErrorReport`] (error
/// types, strings, boxed errors: the failure message lists the causes)
/// and falls back to [`WithDisplay`] (any [`TestOutcome`]) otherwise.
pub struct Returned<T>(Cell<Option<T>>);

impl<T> Returned<T> {
    /// Wraps a test body's return value.
    pub fn new(value: T) -> Self {
        Returned(Cell::new(Some(value)))
    }

    fn take(&self) -> T {
        self.0
            .take()
            .expect("a test's outcome is taken once, by the expansion")
    }
}

/// The outcome of a `Result` whose error converts into an [`ErrorReport`]:
/// the message with its causes.
pub trait WithCauses {
    /// The outcome.
    fn outcome(&self) -> Outcome;
}

impl<E: Into<ErrorReport>> WithCauses for &Returned<Result<(), E>> {
    fn outcome(&self) -> Outcome {
        self.take().map_err(|e| e.into().to_string())
    }
}

/// The outcome of any other [`TestOutcome`]: its `Display` text.
pub trait WithDisplay {
    /// The outcome.
    fn outcome(&self) -> Outcome;
}

impl<T: TestOutcome> WithDisplay for Returned<T> {
    fn outcome(&self) -> Outcome {
        self.take().into_outcome()
    }
}
