//! Whether a run's measured requests failed too often to describe service.

use crate::result::RequestCounts;

impl RequestCounts {
    /// The warning of a run whose measured requests failed more often than
    /// `max_ratio` allows (`--max-error-ratio`), with the likely cause
    /// where one is known (`files`: the requests drew paths from a file
    /// set); `None` within the ratio.
    pub fn error_warning(&self, max_ratio: f64, files: bool) -> Option<String> {
        let ratio = self.error_ratio();
        if ratio <= max_ratio {
            return None;
        }
        let mut text = format!(
            "{} of {} measured requests ({:.1}%) ended in an error, above --max-error-ratio {}: \
             the figures describe failures, not service",
            self.measured_errors(),
            self.sent,
            100.0 * ratio,
            max_ratio
        );
        if self.errors.contains_key("http_status") {
            text.push_str(if files {
                "; the server answered with an error status (`connlab serve --protocol http` \
                 serves a file set's paths only when given the same --manifest)"
            } else {
                "; the server answered with an error status (check --path)"
            });
        }
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_above_the_ratio_warn_with_their_cause() {
        let mut q = RequestCounts {
            sent: 100,
            completed: 90,
            ..RequestCounts::default()
        };
        q.errors.insert("http_status".into(), 10);
        assert_eq!(q.error_warning(0.5, false), None);
        let w = q.error_warning(0.01, false).unwrap();
        assert!(w.contains("above --max-error-ratio 0.01"), "{w}");
        assert!(w.contains("check --path"), "{w}");
        assert!(q.error_warning(0.01, true).unwrap().contains("--manifest"));
    }
}
