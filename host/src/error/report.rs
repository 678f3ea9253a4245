//! [`ErrorReport`]: an error printed as a sentence with its causes, for a
//! program's `main` and for test failures.

use std::error::Error as StdError;
use std::fmt;

/// An error as a person reads it: its `Display` text, then each cause
/// (`source()`) whose text the message does not already contain, one per
/// line. Its `Debug` is the same text, so a `main` returning
/// `Result<(), ErrorReport>` prints a sentence rather than a struct.
///
/// Anything `?` can turn into a `Box<dyn Error>` converts: Vigil's
/// [`Error`](crate::Error), other error types, `String`s and boxed errors.
///
/// ```no_run
/// fn main() -> Result<(), vigil::ErrorReport> {
///     // A malformed `VIGIL_*` variable prints as one sentence naming it.
///     let ctx = vigil::Context::from_env()?;
///     println!("running on {}", ctx.name());
///     Ok(())
/// }
/// ```
///
/// ```
/// let e = vigil::Error::from(
///     vigil::SanitizerConfig::builder().clock_buffer_size(0).build().unwrap_err(),
/// );
/// let text = vigil::ErrorReport::from(e).to_string();
/// assert!(text.starts_with("configuration: "), "{text}");
/// assert!(!text.contains("ConfigError {"), "{text}");
/// ```
pub struct ErrorReport(Box<dyn StdError + 'static>);

impl ErrorReport {
    /// The error the report prints.
    pub fn error(&self) -> &(dyn StdError + 'static) {
        &*self.0
    }
}

impl<E: Into<Box<dyn StdError + 'static>>> From<E> for ErrorReport {
    fn from(e: E) -> Self {
        ErrorReport(e.into())
    }
}

impl fmt::Display for ErrorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut said = self.0.to_string();
        f.write_str(&said)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            // Many errors put their cause's text in their own message
            // (`configuration: {0}`): say each thing once.
            let text = c.to_string();
            if !said.contains(&text) {
                write!(f, "\n  caused by: {text}")?;
                said.push_str(&text);
            }
            cause = c.source();
        }
        Ok(())
    }
}

impl fmt::Debug for ErrorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorReport;
    use std::fmt;

    #[derive(Debug)]
    struct Outer(Inner);
    #[derive(Debug)]
    struct Inner;

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("could not open the device")
        }
    }
    impl fmt::Display for Inner {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the driver is too old")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    impl std::error::Error for Inner {}

    #[test]
    fn causes_follow_the_message_once_each() {
        let report = ErrorReport::from(Outer(Inner));
        assert_eq!(
            format!("{report:?}"),
            "could not open the device\n  caused by: the driver is too old"
        );
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let e = crate::Error::from(
            crate::SanitizerConfig::builder()
                .clock_buffer_size(0)
                .build()
                .unwrap_err(),
        );
        let text = ErrorReport::from(e.clone()).to_string();
        assert_eq!(text, e.to_string());
        assert!(!text.contains("caused by"), "{text}");
    }

    #[test]
    fn strings_and_boxed_errors_convert() {
        assert_eq!(ErrorReport::from("no GPU").to_string(), "no GPU");
        let boxed: Box<dyn std::error::Error> = "boxed".into();
        assert_eq!(format!("{:?}", ErrorReport::from(boxed)), "boxed");
    }
}
