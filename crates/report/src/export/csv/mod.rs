//! The CSV exporter: the report's rows in long form.

use super::{Exporter, Source};
use crate::ReportError;

/// The CSV format: a header of the rows' field names, then a line per row,
/// quoted where a field needs it (nothing at all without rows).
pub(crate) struct Csv;

impl Exporter for Csv {
    fn names(&self) -> &'static [&'static str] {
        &["csv"]
    }

    fn extension(&self) -> &'static str {
        "csv"
    }

    fn export(&self, report: &dyn Source) -> Result<String, ReportError> {
        let rows = report.rows()?;
        if rows.head.is_empty() {
            return Ok(String::new());
        }
        let err = |e: csv::Error| ReportError::Csv(e.to_string());
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&rows.head).map_err(err)?;
        for r in &rows.rows {
            w.write_record(r).map_err(err)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| ReportError::Csv(e.to_string()))?;
        String::from_utf8(bytes).map_err(|e| ReportError::Csv(e.to_string()))
    }
}
