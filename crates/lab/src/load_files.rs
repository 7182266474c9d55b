//! The files of a load run besides its JSON result: `--records` (one line
//! per measured request, CSV or JSON Lines) and `--hdr-log` (HdrHistogram
//! interval logs). Each replaces the file it names only when complete, so
//! a crash leaves the earlier file.

use anyhow::Context;
use connlab_loadgen::{LoadOutcome, RecordSink, RequestRecord};
use connlab_os::files::AtomicFile;
use std::io::{BufWriter, Write};
use std::path::Path;

/// A buffered `--records` file; it replaces the file named only when the
/// run ends ([`RecordsFile::finish`]).
pub struct RecordsFile {
    out: RecordsOut,
    error: Option<std::io::Error>,
}

/// The two formats of `--records`.
enum RecordsOut {
    /// CSV, a [`RequestRecord`] per row.
    Csv(Box<csv::Writer<AtomicFile>>),
    /// JSON Lines.
    Jsonl(BufWriter<AtomicFile>),
}

impl RecordSink for RecordsFile {
    fn record(&mut self, r: &RequestRecord) {
        if self.error.is_some() {
            return;
        }
        let res = match &mut self.out {
            RecordsOut::Csv(w) => w.serialize(r.to_ns()).map_err(std::io::Error::from),
            RecordsOut::Jsonl(out) => serde_json::to_writer(&mut *out, r)
                .map_err(std::io::Error::other)
                .and_then(|_| out.write_all(b"\n")),
        };
        if let Err(e) = res {
            self.error = Some(e);
        }
    }
}

impl RecordsFile {
    /// Opens `--records` at `path`: JSON Lines if it ends in `.jsonl`,
    /// else CSV with its header (written even for a run without a
    /// completed request).
    pub fn create(path: &Path) -> anyhow::Result<RecordsFile> {
        let file = AtomicFile::create(path)
            .with_context(|| format!("creating --records file {}", path.display()))?;
        let out = if path.extension().is_some_and(|e| e == "jsonl") {
            RecordsOut::Jsonl(BufWriter::with_capacity(1 << 20, file))
        } else {
            let mut w = csv::WriterBuilder::new()
                .has_headers(false)
                .buffer_capacity(1 << 20)
                .from_writer(file);
            w.write_record(RequestRecord::CSV_COLUMNS)
                .context("writing --records")?;
            RecordsOut::Csv(Box::new(w))
        };
        Ok(RecordsFile { out, error: None })
    }

    /// Flushes and commits the file; reports the first write error.
    pub fn finish(self) -> std::io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.out {
            RecordsOut::Csv(w) => w.into_inner().map_err(|e| e.into_error())?.commit(),
            RecordsOut::Jsonl(out) => out.into_inner().map_err(|e| e.into_error())?.commit(),
        }
    }
}

/// Writes the service-latency interval logs of `outcome` to `path`
/// (`--hdr-log`), whole or not at all.
pub fn write_hdr_log(path: &Path, outcome: &LoadOutcome) -> anyhow::Result<()> {
    let mut f = BufWriter::new(
        AtomicFile::create(path)
            .with_context(|| format!("creating --hdr-log file {}", path.display()))?,
    );
    outcome
        .write_interval_log(&mut f)
        .and_then(|_| f.into_inner().map_err(|e| e.into_error()))
        .and_then(AtomicFile::commit)
        .with_context(|| format!("writing --hdr-log file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_csv_records_file_holds_its_header() {
        let dir = std::env::temp_dir().join(format!("connlab-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.csv");
        RecordsFile::create(&path).unwrap().finish().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.trim_end(), RequestRecord::CSV_COLUMNS.join(","));
        let jsonl = dir.join("r.jsonl");
        RecordsFile::create(&jsonl).unwrap().finish().unwrap();
        assert_eq!(std::fs::read_to_string(&jsonl).unwrap(), "");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
