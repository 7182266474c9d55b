//! The per-packet log: one CSV line per packet that reached the emulator,
//! forwarded or dropped. Forwarding threads hand records over in batches
//! through a channel; a writer thread formats them into a large buffer, so
//! the forwarding path never waits for the disk.

use crate::packet::{tcp_flags, PacketInfo};
use crate::LinkemError;
use connlab_os::files::AtomicFile;
use serde::Serialize;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// The CSV header line (without the newline): the fields of [`LogRow`].
pub const HEADER: &str = "direction,index,arrival_ns,scheduled_ns,departure_ns,fate,bytes,segments,src,dst,protocol,sport,dport,seq,ack,flags,payload_len";

/// One row of the log as written: a field per column of [`HEADER`], in
/// order; `None` writes an empty field.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogRow {
    /// `lr` (left to right) or `rl`.
    pub direction: &'static str,
    /// Arrival index within the direction, from 1.
    pub index: u64,
    /// When it was read (ns since the emulator started).
    pub arrival_ns: u64,
    /// When the model said it should leave.
    pub scheduled_ns: Option<u64>,
    /// When it was written back.
    pub departure_ns: Option<u64>,
    /// What happened to it (`sent`, `loss`, `queue`, ...).
    pub fate: &'static str,
    /// Bytes on the wire.
    pub bytes: u64,
    /// Wire packets it stands for.
    pub segments: u64,
    /// IPv4 source.
    pub src: Option<Ipv4Addr>,
    /// IPv4 destination.
    pub dst: Option<Ipv4Addr>,
    /// IP protocol number (IPv4 only).
    pub protocol: Option<u8>,
    /// Source port.
    pub sport: Option<u16>,
    /// Destination port.
    pub dport: Option<u16>,
    /// TCP sequence number.
    pub seq: Option<u32>,
    /// TCP acknowledgement number.
    pub ack: Option<u32>,
    /// TCP flags as letters (`.` for none).
    pub flags: Option<String>,
    /// Transport payload length.
    pub payload_len: u32,
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Written back at `departure_ns`.
    Sent,
    /// Dropped by the loss model.
    Loss,
    /// Dropped: the rate limiter's queue was full.
    Queue,
    /// Dropped: the emulator held too many bytes (`max_held_bytes`).
    Overflow,
    /// Writing it back failed.
    WriteError,
    /// Still held when the emulator stopped.
    Unsent,
}

impl Fate {
    fn as_str(self) -> &'static str {
        match self {
            Fate::Sent => "sent",
            Fate::Loss => "loss",
            Fate::Queue => "queue",
            Fate::Overflow => "overflow",
            Fate::WriteError => "write_error",
            Fate::Unsent => "unsent",
        }
    }
}

/// One packet's line.
#[derive(Clone, Copy, Debug)]
pub struct LogRecord {
    /// 0: left to right, 1: right to left.
    pub direction: u8,
    /// Arrival index within the direction, from 1.
    pub index: u64,
    /// When it was read (ns since the emulator started).
    pub arrival_ns: u64,
    /// When the model said it should leave, if it was not dropped by the model.
    pub scheduled_ns: Option<u64>,
    /// When it was written back, if it was.
    pub departure_ns: Option<u64>,
    /// What happened to it.
    pub fate: Fate,
    /// Bytes on the wire (a GSO super-packet counts its segments' headers).
    pub bytes: u64,
    /// Wire packets it stands for (more than 1 for a GSO super-packet).
    pub segments: u64,
    /// Its headers.
    pub info: PacketInfo,
}

impl LogRecord {
    /// The row this record writes.
    pub fn row(&self) -> LogRow {
        let i = &self.info;
        LogRow {
            direction: if self.direction == 0 { "lr" } else { "rl" },
            index: self.index,
            arrival_ns: self.arrival_ns,
            scheduled_ns: self.scheduled_ns,
            departure_ns: self.departure_ns,
            fate: self.fate.as_str(),
            bytes: self.bytes,
            segments: self.segments,
            src: i.addrs.map(|(s, _)| s),
            dst: i.addrs.map(|(_, d)| d),
            protocol: i.addrs.map(|_| i.protocol),
            sport: i.ports.map(|(s, _)| s),
            dport: i.ports.map(|(_, d)| d),
            seq: i.tcp.map(|(seq, _, _)| seq),
            ack: i.tcp.map(|(_, ack, _)| ack),
            flags: i.tcp.map(|(_, _, f)| tcp_flags(f)),
            payload_len: i.payload_len,
        }
    }
}

/// The writer thread and the way to reach it.
#[derive(Debug)]
pub struct LogWriter {
    sender: Option<Sender<Vec<LogRecord>>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

impl LogWriter {
    /// Starts a replacement for `path` (it appears whole when the writer
    /// finishes; see [`connlab_os::files::AtomicFile`]), writes the header
    /// and starts the writer.
    pub fn create(path: &Path) -> Result<LogWriter, LinkemError> {
        let file = AtomicFile::create(path)
            .map_err(|e| LinkemError::io(format!("creating log {}", path.display()), e))?;
        let (sender, receiver) = channel();
        let thread = std::thread::Builder::new()
            .name("linkem-log".into())
            .spawn(move || write_all(file, receiver))
            .map_err(|e| LinkemError::io("starting the log writer", e))?;
        Ok(LogWriter {
            sender: Some(sender),
            thread: Some(thread),
        })
    }

    /// A handle for a forwarding thread.
    pub fn sender(&self) -> Option<Sender<Vec<LogRecord>>> {
        self.sender.clone()
    }

    /// Waits until every sender is gone and everything is written; returns the
    /// number of lines (without the header).
    pub fn finish(mut self) -> Result<u64, LinkemError> {
        self.sender = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r.map_err(|e| LinkemError::io("writing the log", e)),
            Some(Err(_)) => Err(LinkemError::io(
                "the log writer",
                std::io::Error::other("panicked"),
            )),
            None => Ok(0),
        }
    }
}

fn write_all(file: AtomicFile, receiver: Receiver<Vec<LogRecord>>) -> std::io::Result<u64> {
    let mut out = csv::WriterBuilder::new()
        .has_headers(false)
        .buffer_capacity(1 << 20)
        .from_writer(file);
    // The header even when no packet comes.
    out.write_record(HEADER.split(','))?;
    let mut lines = 0;
    for batch in receiver {
        for r in &batch {
            out.serialize(r.row())?;
        }
        lines += batch.len() as u64;
    }
    out.into_inner().map_err(|e| e.into_error())?.commit()?;
    Ok(lines)
}

/// The CSV line of a record, with its newline (tests).
#[cfg(test)]
fn csv_line(r: &LogRecord) -> String {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.serialize(r.row()).unwrap();
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn the_log_appears_whole_when_the_writer_finishes() {
        let dir = std::env::temp_dir().join(format!("linkem-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pkts.csv");
        std::fs::write(&path, "earlier\n").unwrap();
        let writer = LogWriter::create(&path).unwrap();
        let record = LogRecord {
            direction: 1,
            index: 1,
            arrival_ns: 5,
            scheduled_ns: None,
            departure_ns: None,
            fate: Fate::Loss,
            bytes: 60,
            segments: 1,
            info: PacketInfo::default(),
        };
        writer.sender().unwrap().send(vec![record; 3]).unwrap();
        // Until the writer finishes, the earlier file is what a reader sees.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "earlier\n");
        assert_eq!(writer.finish().unwrap(), 3);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(HEADER), "{text}");
        assert_eq!(text.lines().count(), 4);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_line_has_every_column() {
        let r = LogRecord {
            direction: 0,
            index: 3,
            arrival_ns: 10,
            scheduled_ns: Some(20),
            departure_ns: Some(25),
            fate: Fate::Sent,
            bytes: 1500,
            segments: 1,
            info: PacketInfo {
                addrs: Some((Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8))),
                protocol: 6,
                ports: Some((1, 2)),
                tcp: Some((100, 200, 0x10)),
                payload_len: 1448,
            },
        };
        let s = csv_line(&r);
        assert_eq!(
            s,
            "lr,3,10,20,25,sent,1500,1,1.2.3.4,5.6.7.8,6,1,2,100,200,.,1448\n"
        );
        // The header is the row type's field names.
        let mut w = csv::Writer::from_writer(Vec::new());
        w.serialize(r.row()).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        assert_eq!(text.lines().next(), Some(HEADER));
        let cols = HEADER.split(',').count();
        assert_eq!(s.trim_end().split(',').count(), cols);
        let d = csv_line(&LogRecord {
            fate: Fate::Loss,
            departure_ns: None,
            info: PacketInfo::default(),
            ..r
        });
        assert_eq!(d.trim_end().split(',').count(), cols);
    }
}
