//! pcap file ports: read frames from a classic pcap file, write one pcap
//! file per output port, and a driver that runs a [`Pipeline`] between them.
//!
//! # The pcap contract
//!
//! * **Input**: a classic pcap file (not pcapng), either byte order,
//!   microsecond or nanosecond timestamps, link type Ethernet (1). Each
//!   record's captured bytes are one frame. A file that is not pcap, is
//!   pcapng or has another link type is refused before anything is written.
//! * **Cut-short files**: a record that the file ends inside (a capture
//!   that was killed) ends the input. Every frame before it is forwarded
//!   and written; the run reports [`PcapInError::TruncatedRecord`] in
//!   [`PcapRun::stopped_by`]. A record whose captured length is larger than
//!   the snapshot length and 256 KiB, or than pcap-file's 8 MB read buffer
//!   while the file goes on, is corrupt ([`PcapInError::BadRecord`]); it
//!   ends the input the same way.
//! * **Output**: `port-N.pcap` for each output port N that sent at least
//!   one frame and `controller.pcap` when any frame was punted, all in one
//!   directory. Each holds the frames in input order, each record
//!   byte-identical to its input record (timestamp, captured and original
//!   length, data); the file header copies the input's byte order,
//!   timestamp resolution, version and snapshot length. Outputs of an
//!   earlier run in the directory (`port-*.pcap`, `controller.pcap`) are
//!   removed first, so the directory shows this run only.
//!
//! [`PcapOut`] is the one pcap writer (on pcap-file): the port files use
//! it, and so do captures made from scratch (`nexthop gen`, the lab's
//! input file, [`PcapOut::ethernet_header`]).

use std::borrow::Cow;
use std::fs::{self, File};
use std::io::{self, BufWriter, Chain, Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter, RawPcapPacket};
use pcap_file::{DataLink, Endianness, PcapError};
use thiserror::Error;

use crate::counters::Counters;
use crate::ipfwd::{IpDecision, IpPipeline};
use crate::pipeline::{Decision, Egress, NameTable, Pipeline, BATCH};

/// Bytes of the pcap file header.
const FILE_HEADER_LEN: usize = 24;
/// Bytes of a pcap record header.
const RECORD_HEADER_LEN: u64 = 16;
/// Captured lengths up to this are accepted whatever the snapshot length
/// says (libpcap's largest snapshot length).
const MAX_SANE_CAPLEN: u32 = 262_144;
/// The pcapng section header block type, as its first four bytes.
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// Classic pcap magics, as the file's first four bytes.
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xd4, 0xc3, 0xb2, 0xa1], // little-endian, microseconds
    [0xa1, 0xb2, 0xc3, 0xd4], // big-endian, microseconds
    [0x4d, 0x3c, 0xb2, 0xa1], // little-endian, nanoseconds
    [0xa1, 0xb2, 0x3c, 0x4d], // big-endian, nanoseconds
];

/// Why a pcap file could not be read (all or in part).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PcapInError {
    /// The file could not be opened or read.
    #[error("cannot read: {0}")]
    Io(#[source] io::Error),
    /// The file is empty.
    #[error("empty file, not a pcap file")]
    Empty,
    /// The file is shorter than the pcap file header.
    #[error("not a pcap file: {got} bytes, shorter than the 24-byte pcap file header")]
    TooShort {
        /// File length.
        got: usize,
    },
    /// The file is pcapng.
    #[error(
        "a pcapng file; only classic pcap is supported \
         (convert it with `editcap -F pcap IN OUT` or `tcpdump -r IN -w OUT`)"
    )]
    PcapNg,
    /// The file does not start with a pcap magic number.
    #[error(
        "not a pcap file: it starts with bytes {magic:02x?}, not a pcap magic number \
         (a1b2c3d4 or a1b23c4d in either byte order)"
    )]
    NotPcap {
        /// The first four bytes.
        magic: [u8; 4],
    },
    /// The link type is not Ethernet.
    #[error("link type {linktype} is not Ethernet (1); only Ethernet captures can be forwarded")]
    LinkType {
        /// The file's link type.
        linktype: u32,
    },
    /// The file ends inside a record.
    #[error(
        "record {record} (at byte offset {offset}) is truncated: \
         the file ends inside it"
    )]
    TruncatedRecord {
        /// 1-based record number.
        record: u64,
        /// Offset of its record header in the file.
        offset: u64,
    },
    /// A record header that cannot be right.
    #[error("record {record} (at byte offset {offset}) is corrupt: {reason}")]
    BadRecord {
        /// 1-based record number.
        record: u64,
        /// Offset of its record header in the file.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

/// One captured frame with its record header fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcapFrame {
    /// Timestamp seconds.
    pub ts_sec: u32,
    /// Timestamp fraction (micro- or nanoseconds, as the file says).
    pub ts_frac: u32,
    /// Original length on the wire.
    pub orig_len: u32,
    /// Captured bytes: the frame.
    pub data: Vec<u8>,
}

impl AsRef<[u8]> for PcapFrame {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl AsMut<[u8]> for PcapFrame {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

/// A classic pcap file with Ethernet frames, read record by record.
pub struct PcapIn<R: Read> {
    reader: PcapReader<Chain<Cursor<[u8; FILE_HEADER_LEN]>, R>>,
    header: PcapHeader,
    /// Records read so far.
    records: u64,
    /// Offset of the next record header.
    offset: u64,
    /// Set once a record error ended the input.
    done: bool,
    /// The file, when opened by path: used to tell a cut-short file from a
    /// corrupt record length.
    path: Option<PathBuf>,
}

impl<R: Read> std::fmt::Debug for PcapIn<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapIn")
            .field("header", &self.header)
            .field("records", &self.records)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl PcapIn<File> {
    /// Open the pcap file at `path` and check its header.
    pub fn open(path: &Path) -> Result<PcapIn<File>, PcapInError> {
        let mut p = PcapIn::new(File::open(path).map_err(PcapInError::Io)?)?;
        p.path = Some(path.to_path_buf());
        Ok(p)
    }
}

impl<R: Read> PcapIn<R> {
    /// Read and check the pcap file header from `r`.
    ///
    /// # Errors
    /// [`PcapInError::Empty`], [`TooShort`](PcapInError::TooShort),
    /// [`PcapNg`](PcapInError::PcapNg), [`NotPcap`](PcapInError::NotPcap),
    /// [`LinkType`](PcapInError::LinkType) or [`Io`](PcapInError::Io).
    pub fn new(mut r: R) -> Result<PcapIn<R>, PcapInError> {
        let mut head = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut r, &mut head).map_err(PcapInError::Io)?;
        let magic = [head[0], head[1], head[2], head[3]];
        if got == 0 {
            return Err(PcapInError::Empty);
        }
        if got >= 4 && magic == PCAPNG_MAGIC {
            return Err(PcapInError::PcapNg);
        }
        if got >= 4 && !PCAP_MAGICS.contains(&magic) {
            return Err(PcapInError::NotPcap { magic });
        }
        if got < FILE_HEADER_LEN {
            return Err(PcapInError::TooShort { got });
        }
        let reader = PcapReader::new(Cursor::new(head).chain(r)).map_err(|e| match e {
            PcapError::IoError(io) => PcapInError::Io(io),
            _ => PcapInError::NotPcap { magic },
        })?;
        let header = reader.header();
        if header.datalink != DataLink::ETHERNET {
            return Err(PcapInError::LinkType {
                linktype: header.datalink.into(),
            });
        }
        Ok(PcapIn {
            reader,
            header,
            records: 0,
            offset: FILE_HEADER_LEN as u64,
            done: false,
            path: None,
        })
    }

    /// The file header (byte order, timestamp resolution, snapshot length).
    pub fn header(&self) -> PcapHeader {
        self.header
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Read the next record into `frame` (reusing its buffer). `Ok(false)`
    /// at the end of the file.
    ///
    /// # Errors
    /// [`PcapInError::TruncatedRecord`] when the file ends inside the
    /// record, [`PcapInError::BadRecord`] for an impossible captured
    /// length, [`PcapInError::Io`] for read errors. After an error the
    /// input is finished: later calls return `Ok(false)`.
    pub fn read_frame(&mut self, frame: &mut PcapFrame) -> Result<bool, PcapInError> {
        if self.done {
            return Ok(false);
        }
        let record = self.records + 1;
        let offset = self.offset;
        let r = match self.reader.next_raw_packet() {
            None => {
                self.done = true;
                return Ok(false);
            }
            Some(r) => r,
        };
        let p = match r {
            Ok(p) => p,
            Err(e) => {
                self.done = true;
                return Err(match e {
                    PcapError::IoError(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
                        self.end_of_data(record, offset)
                    }
                    PcapError::IoError(io) => PcapInError::Io(io),
                    other => PcapInError::BadRecord {
                        record,
                        offset,
                        reason: other.to_string(),
                    },
                });
            }
        };
        let max = self.header.snaplen.max(MAX_SANE_CAPLEN);
        if p.incl_len > max {
            self.done = true;
            return Err(PcapInError::BadRecord {
                record,
                offset,
                reason: format!(
                    "captured length {} exceeds the snapshot length {} and {MAX_SANE_CAPLEN}",
                    p.incl_len, self.header.snaplen
                ),
            });
        }
        frame.ts_sec = p.ts_sec;
        frame.ts_frac = p.ts_frac;
        frame.orig_len = p.orig_len;
        frame.data.clear();
        frame.data.extend_from_slice(&p.data);
        self.records = record;
        self.offset = offset + RECORD_HEADER_LEN + p.data.len() as u64;
        Ok(true)
    }
}

impl<R: Read> PcapIn<R> {
    /// The reader stopped inside record `record`: either the file ends
    /// there, or (pcap-file buffers at most 8 MB) the record claims a length
    /// too large to read although the file goes on. Re-read the record
    /// header by path, when there is one, to tell which.
    fn end_of_data(&self, record: u64, offset: u64) -> PcapInError {
        let truncated = PcapInError::TruncatedRecord { record, offset };
        let Some(path) = &self.path else {
            return truncated;
        };
        let Some((incl_len, file_len)) = record_len_at(path, offset, self.header.endianness) else {
            return truncated;
        };
        if offset + RECORD_HEADER_LEN + incl_len as u64 <= file_len {
            PcapInError::BadRecord {
                record,
                offset,
                reason: format!(
                    "captured length {incl_len} is too large to read (corrupt record header?)"
                ),
            }
        } else {
            truncated
        }
    }
}

/// The captured length of the record at `offset` of the file at `path`,
/// and the file's length.
fn record_len_at(path: &Path, offset: u64, endianness: Endianness) -> Option<(u32, u64)> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(path).ok()?;
    let file_len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(offset + 8)).ok()?;
    let mut b = [0u8; 4];
    f.read_exact(&mut b).ok()?;
    let incl_len = match endianness {
        Endianness::Big => u32::from_be_bytes(b),
        Endianness::Little => u32::from_le_bytes(b),
    };
    Some((incl_len, file_len))
}

/// Fill `buf` from `r` as far as it goes; the number of bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// An output file could not be written.
#[derive(Debug, Error)]
#[error("{}: {reason}", path.display())]
pub struct PcapOutError {
    /// The file or directory.
    pub path: PathBuf,
    /// What failed.
    pub reason: String,
}

impl PcapOutError {
    fn new(path: &Path, reason: impl ToString) -> PcapOutError {
        PcapOutError {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }
}

/// One output file written by [`PcapPorts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputFile {
    /// The output port, or `None` for `controller.pcap`.
    pub port: Option<u16>,
    /// Where it is.
    pub path: PathBuf,
    /// Frames written.
    pub frames: u64,
}

/// One classic pcap file being written, on pcap-file's writer: an output
/// port of [`PcapPorts`], or a capture made from scratch (`nexthop gen`,
/// the lab's input file).
pub struct PcapOut {
    path: PathBuf,
    writer: PcapWriter<BufWriter<File>>,
    frames: u64,
}

impl std::fmt::Debug for PcapOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapOut")
            .field("path", &self.path)
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl PcapOut {
    /// The file header of captures made from scratch: version 2.4,
    /// little-endian, microsecond timestamps, snapshot length 65535,
    /// Ethernet.
    pub fn ethernet_header() -> PcapHeader {
        PcapHeader {
            endianness: Endianness::Little,
            ts_resolution: pcap_file::TsResolution::MicroSecond,
            datalink: DataLink::ETHERNET,
            ..PcapHeader::default()
        }
    }

    /// Create (or truncate) `path` and write `header`.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn create(path: &Path, header: PcapHeader) -> Result<PcapOut, PcapOutError> {
        let file = File::create(path).map_err(|e| PcapOutError::new(path, e))?;
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .map_err(|e| PcapOutError::new(path, e))?;
        Ok(PcapOut {
            path: path.to_path_buf(),
            writer,
            frames: 0,
        })
    }

    /// Append a record holding the whole of `data` (captured and original
    /// length equal), stamped `timestamp` in the header's resolution.
    ///
    /// # Errors
    /// `data` is longer than the snapshot length, `timestamp` does not fit
    /// the format (seconds past `u32::MAX`), or the write failed.
    pub fn write(&mut self, timestamp: Duration, data: &[u8]) -> Result<(), PcapOutError> {
        let orig_len = u32::try_from(data.len())
            .map_err(|_| PcapOutError::new(&self.path, "frame longer than 4 GiB"))?;
        let packet = PcapPacket {
            timestamp,
            orig_len,
            data: Cow::Borrowed(data),
        };
        self.writer
            .write_packet(&packet)
            .map_err(|e| PcapOutError::new(&self.path, e))?;
        self.frames += 1;
        Ok(())
    }

    /// Append `f` as a record byte-identical to the one it was read from
    /// (timestamp fields, captured and original length, data).
    ///
    /// # Errors
    /// The write failed.
    pub fn write_frame(&mut self, f: &PcapFrame) -> Result<(), PcapOutError> {
        let incl_len = u32::try_from(f.data.len())
            .map_err(|_| PcapOutError::new(&self.path, "frame longer than 4 GiB"))?;
        let raw = RawPcapPacket {
            ts_sec: f.ts_sec,
            ts_frac: f.ts_frac,
            incl_len,
            orig_len: f.orig_len,
            data: Cow::Borrowed(&f.data),
        };
        self.writer
            .write_raw_packet(&raw)
            .map_err(|e| PcapOutError::new(&self.path, e))?;
        self.frames += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flush the file; the number of records written.
    ///
    /// # Errors
    /// The flush failed.
    pub fn finish(self) -> Result<u64, PcapOutError> {
        let mut w = self.writer.into_writer();
        w.flush().map_err(|e| PcapOutError::new(&self.path, e))?;
        Ok(self.frames)
    }
}

/// Output ports as pcap files in one directory, created on first use.
pub struct PcapPorts {
    dir: PathBuf,
    header: PcapHeader,
    /// Indexed by port; `None` until the port sends.
    ports: Vec<Option<PcapOut>>,
    controller: Option<PcapOut>,
}

impl std::fmt::Debug for PcapPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapPorts")
            .field("dir", &self.dir)
            .field("open_ports", &self.ports.iter().flatten().count())
            .finish_non_exhaustive()
    }
}

/// Name of the file for output port `port`.
pub fn port_file_name(port: u16) -> String {
    format!("port-{port}.pcap")
}

/// Name of the file for punted frames.
pub const CONTROLLER_FILE: &str = "controller.pcap";

/// Whether `name` is an output file name of this module.
fn is_output_name(name: &str) -> bool {
    if name == CONTROLLER_FILE {
        return true;
    }
    name.strip_prefix("port-")
        .and_then(|r| r.strip_suffix(".pcap"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl PcapPorts {
    /// Output into `dir` (created if absent), with file headers like
    /// `header` (link type forced to Ethernet). Outputs of an earlier run
    /// in `dir` are removed.
    pub fn create(dir: &Path, header: PcapHeader) -> Result<PcapPorts, PcapOutError> {
        fs::create_dir_all(dir).map_err(|e| PcapOutError::new(dir, e))?;
        for e in fs::read_dir(dir).map_err(|e| PcapOutError::new(dir, e))? {
            let e = e.map_err(|e| PcapOutError::new(dir, e))?;
            let name = e.file_name();
            if name.to_str().is_some_and(is_output_name) {
                fs::remove_file(e.path()).map_err(|err| {
                    PcapOutError::new(&e.path(), format!("remove old output: {err}"))
                })?;
            }
        }
        Ok(PcapPorts {
            dir: dir.to_path_buf(),
            header: PcapHeader {
                datalink: DataLink::ETHERNET,
                ..header
            },
            ports: Vec::new(),
            controller: None,
        })
    }

    fn open(&self, name: &str) -> Result<PcapOut, PcapOutError> {
        PcapOut::create(&self.dir.join(name), self.header)
    }

    /// Write `frame` to output port `port`.
    pub fn emit(&mut self, port: u16, frame: &PcapFrame) -> Result<(), PcapOutError> {
        let i = port as usize;
        if self.ports.len() <= i {
            self.ports.resize_with(i + 1, || None);
        }
        if self.ports[i].is_none() {
            self.ports[i] = Some(self.open(&port_file_name(port))?);
        }
        match self.ports[i].as_mut() {
            Some(out) => out.write_frame(frame),
            None => Ok(()),
        }
    }

    /// Write `frame` to `controller.pcap`.
    pub fn punt(&mut self, frame: &PcapFrame) -> Result<(), PcapOutError> {
        if self.controller.is_none() {
            self.controller = Some(self.open(CONTROLLER_FILE)?);
        }
        match self.controller.as_mut() {
            Some(out) => out.write_frame(frame),
            None => Ok(()),
        }
    }

    /// Flush and close every file; the files written, ports in order and
    /// then the controller file.
    pub fn finish(self) -> Result<Vec<OutputFile>, PcapOutError> {
        let mut files = Vec::new();
        let ports = self
            .ports
            .into_iter()
            .enumerate()
            .filter_map(|(p, o)| o.map(|o| (Some(p as u16), o)));
        for (port, out) in ports.chain(self.controller.map(|o| (None, o))) {
            let path = out.path().to_path_buf();
            let frames = out.finish()?;
            files.push(OutputFile { port, path, frames });
        }
        Ok(files)
    }
}

/// What [`forward_pcap`] did.
#[derive(Debug)]
pub struct PcapRun {
    /// The pipeline's counters for this run.
    pub counters: Counters,
    /// Time spent in [`Pipeline::process`] (naming, lookups, decisions and
    /// counting; not reading or writing files).
    pub pipeline_time: Duration,
    /// The record error that ended the input early (frames before it were
    /// forwarded), if any.
    pub stopped_by: Option<PcapInError>,
    /// The files written.
    pub outputs: Vec<OutputFile>,
}

impl PcapRun {
    /// Frames per second through the pipeline, in millions (0 when no time
    /// was measured).
    pub fn mpps(&self) -> f64 {
        let s = self.pipeline_time.as_secs_f64();
        if s > 0.0 {
            self.counters.frames_in as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

/// Forward every frame of `input` (as input port `in_port`) through
/// `pipeline` in batches of [`BATCH`], writing the frames each decision
/// sends to `out`. The counters reported are those of this run.
///
/// # Errors
/// Only output errors; input errors after the file header end the input
/// and are reported in [`PcapRun::stopped_by`].
pub fn forward_pcap<T: NameTable, R: Read>(
    pipeline: &mut Pipeline<T>,
    in_port: u16,
    input: &mut PcapIn<R>,
    mut out: PcapPorts,
) -> Result<PcapRun, PcapOutError> {
    let before = pipeline.take_counters();
    let mut batch: Vec<PcapFrame> = (0..BATCH).map(|_| PcapFrame::default()).collect();
    let mut decisions: Vec<Decision> = Vec::with_capacity(BATCH);
    let mut pipeline_time = Duration::ZERO;
    let mut stopped_by = None;
    loop {
        let mut n = 0;
        for slot in batch.iter_mut() {
            match input.read_frame(slot) {
                Ok(true) => n += 1,
                Ok(false) => break,
                Err(e) => {
                    stopped_by = Some(e);
                    break;
                }
            }
        }
        if n > 0 {
            let t = Instant::now();
            pipeline.process(in_port, &batch[..n], &mut decisions);
            pipeline_time += t.elapsed();
            for (frame, d) in batch[..n].iter().zip(&decisions) {
                match pipeline.egress(d) {
                    Egress::Ports(ports) => {
                        for &p in ports {
                            out.emit(p, frame)?;
                        }
                    }
                    Egress::Controller => out.punt(frame)?,
                    Egress::Discard => {}
                }
            }
        }
        if n < BATCH {
            break;
        }
    }
    let counters = pipeline.take_counters();
    let mut carried = before;
    carried.merge(&counters);
    pipeline.set_counters(carried);
    Ok(PcapRun {
        counters,
        pipeline_time,
        stopped_by,
        outputs: out.finish()?,
    })
}

/// [`forward_pcap`] for the IP pipeline: every frame of `input` (as input
/// port `in_port`) goes through `pipeline` in batches of [`BATCH`]; each
/// forwarded frame is written, rewritten (MACs, TTL or hop limit, IPv4
/// checksum), to its port's file with its record's timestamp and original
/// length. `PcapRun::pipeline_time` is the time in
/// [`IpPipeline::process`] (parsing, lookups, rewriting, counting).
///
/// # Errors
/// Only output errors, as for [`forward_pcap`].
pub fn forward_pcap_ip<R: Read>(
    pipeline: &mut IpPipeline<'_>,
    in_port: u16,
    input: &mut PcapIn<R>,
    mut out: PcapPorts,
) -> Result<PcapRun, PcapOutError> {
    let before = pipeline.take_counters();
    let mut batch: Vec<PcapFrame> = (0..BATCH).map(|_| PcapFrame::default()).collect();
    let mut decisions: Vec<IpDecision> = Vec::with_capacity(BATCH);
    let mut pipeline_time = Duration::ZERO;
    let mut stopped_by = None;
    loop {
        let mut n = 0;
        for slot in batch.iter_mut() {
            match input.read_frame(slot) {
                Ok(true) => n += 1,
                Ok(false) => break,
                Err(e) => {
                    stopped_by = Some(e);
                    break;
                }
            }
        }
        if n > 0 {
            let t = Instant::now();
            pipeline.process(in_port, &mut batch[..n], &mut decisions);
            pipeline_time += t.elapsed();
            for (frame, d) in batch[..n].iter().zip(&decisions) {
                if let IpDecision::Forward(p) = d {
                    out.emit(*p, frame)?;
                }
            }
        }
        if n < BATCH {
            break;
        }
    }
    let counters = pipeline.take_counters();
    let mut carried = before;
    carried.merge(&counters);
    pipeline.set_counters(carried);
    Ok(PcapRun {
        counters,
        pipeline_time,
        stopped_by,
        outputs: out.finish()?,
    })
}

#[cfg(test)]
mod tests {
    use nexthop_othello::fib::{Action, ConciseFib, KeyType};
    use nexthop_othello::Config;
    use pcap_file::TsResolution;

    use super::*;
    use crate::pipeline::{MissPolicy, PipelineConfig};

    /// A classic pcap file written by hand (not by pcap-file), so the
    /// reader is checked against an independent writer.
    fn pcap_bytes(
        big_endian: bool,
        nanos: bool,
        linktype: u32,
        records: &[(u32, u32, &[u8])],
    ) -> Vec<u8> {
        let w32 = |v: &mut Vec<u8>, x: u32| {
            v.extend_from_slice(&if big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            })
        };
        let w16 = |v: &mut Vec<u8>, x: u16| {
            v.extend_from_slice(&if big_endian {
                x.to_be_bytes()
            } else {
                x.to_le_bytes()
            })
        };
        let mut v = Vec::new();
        w32(&mut v, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
        w16(&mut v, 2);
        w16(&mut v, 4);
        w32(&mut v, 0);
        w32(&mut v, 0);
        w32(&mut v, 65535);
        w32(&mut v, linktype);
        for (sec, frac, data) in records {
            w32(&mut v, *sec);
            w32(&mut v, *frac);
            w32(&mut v, data.len() as u32);
            w32(&mut v, data.len() as u32 + 4);
            v.extend_from_slice(data);
        }
        v
    }

    /// The raw records (header and data) of a little-endian pcap file.
    fn raw_records(file: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut at = FILE_HEADER_LEN;
        while at < file.len() {
            let len = u32::from_le_bytes(file[at + 8..at + 12].try_into().unwrap()) as usize;
            out.push(&file[at..at + 16 + len]);
            at += 16 + len;
        }
        out
    }

    fn frame(last: u8, tag: u8) -> Vec<u8> {
        let mut f = vec![
            0x02, 0, 0, 0, 0, last, 0x02, 0, 0, 0, 0, 0xfe, 0x88, 0xb5, tag,
        ];
        f.resize(60, tag);
        f
    }

    #[test]
    fn pcap_out_writes_classic_little_endian_records_that_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gen.pcap");
        let mut w = PcapOut::create(&path, PcapOut::ethernet_header()).unwrap();
        let (a, b) = (frame(1, 7), frame(2, 9));
        w.write(Duration::from_micros(5), &a).unwrap();
        w.write(Duration::from_micros(2_000_003), &b).unwrap();
        assert_eq!(w.frames(), 2);
        assert_eq!(w.finish().unwrap(), 2);
        let bytes = fs::read(&path).unwrap();
        // Written by hand: the 24-byte header, then per record sec, usec,
        // captured and original length (both the frame's), data.
        let mut want = Vec::new();
        want.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        want.extend_from_slice(&2u16.to_le_bytes());
        want.extend_from_slice(&4u16.to_le_bytes());
        for x in [0u32, 0, 65535, 1] {
            want.extend_from_slice(&x.to_le_bytes());
        }
        for (sec, usec, f) in [(0u32, 5u32, &a), (2, 3, &b)] {
            for x in [sec, usec, 60, 60] {
                want.extend_from_slice(&x.to_le_bytes());
            }
            want.extend_from_slice(f);
        }
        assert_eq!(bytes, want);
        let (frames, err) = read_all(&bytes);
        assert!(err.is_none());
        assert_eq!(frames.len(), 2);
        assert_eq!((frames[1].ts_sec, frames[1].ts_frac), (2, 3));
        assert_eq!(frames[1].data, b);
    }

    #[test]
    fn pcap_out_refuses_frames_past_the_snapshot_length_and_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("small.pcap");
        let header = PcapHeader {
            snaplen: 59,
            ..PcapOut::ethernet_header()
        };
        let mut w = PcapOut::create(&path, header).unwrap();
        let e = w.write(Duration::ZERO, &frame(1, 1)).unwrap_err();
        assert_eq!(e.path, path);
        assert!(e.reason.contains("snap_len"), "{e}");
        assert_eq!(w.frames(), 0);
        let missing = dir.path().join("no-such-dir").join("x.pcap");
        let e = PcapOut::create(&missing, header).unwrap_err();
        assert_eq!(e.path, missing);
    }

    fn read_all(bytes: &[u8]) -> (Vec<PcapFrame>, Option<PcapInError>) {
        let mut r = PcapIn::new(bytes).unwrap();
        let mut v = Vec::new();
        loop {
            let mut f = PcapFrame::default();
            match r.read_frame(&mut f) {
                Ok(true) => v.push(f),
                Ok(false) => return (v, None),
                Err(e) => {
                    assert!(!r.read_frame(&mut f).unwrap(), "input ends after an error");
                    return (v, Some(e));
                }
            }
        }
    }

    #[test]
    fn reads_microsecond_and_nanosecond_files_in_both_byte_orders() {
        let (a, b) = (frame(1, 1), frame(2, 2));
        for big in [false, true] {
            for nanos in [false, true] {
                let bytes = pcap_bytes(big, nanos, 1, &[(10, 999_999, &a), (11, 5, &b)]);
                let r = PcapIn::new(&bytes[..]).unwrap();
                let h = r.header();
                assert_eq!(
                    h.endianness,
                    if big {
                        Endianness::Big
                    } else {
                        Endianness::Little
                    }
                );
                let res = if nanos {
                    TsResolution::NanoSecond
                } else {
                    TsResolution::MicroSecond
                };
                assert_eq!(h.ts_resolution, res);
                let (frames, err) = read_all(&bytes);
                assert!(err.is_none());
                assert_eq!(
                    frames,
                    [
                        PcapFrame {
                            ts_sec: 10,
                            ts_frac: 999_999,
                            orig_len: 64,
                            data: a.clone()
                        },
                        PcapFrame {
                            ts_sec: 11,
                            ts_frac: 5,
                            orig_len: 64,
                            data: b.clone()
                        },
                    ]
                );
            }
        }
    }

    #[test]
    fn refuses_files_that_are_not_ethernet_pcap_with_a_reason() {
        let e = PcapIn::new(&b""[..]).unwrap_err();
        assert!(matches!(e, PcapInError::Empty), "{e}");
        let e = PcapIn::new(&b"hello, this is a text file\n"[..]).unwrap_err();
        assert!(
            matches!(e, PcapInError::NotPcap { magic } if &magic == b"hell"),
            "{e}"
        );
        assert!(e.to_string().contains("not a pcap file"), "{e}");
        let e = PcapIn::new(&[0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0][..]).unwrap_err();
        assert!(matches!(e, PcapInError::PcapNg), "{e}");
        let full = pcap_bytes(false, false, 1, &[]);
        let e = PcapIn::new(&full[..10]).unwrap_err();
        assert!(matches!(e, PcapInError::TooShort { got: 10 }), "{e}");
        let e = PcapIn::new(&pcap_bytes(false, false, 113, &[])[..]).unwrap_err();
        assert!(matches!(e, PcapInError::LinkType { linktype: 113 }), "{e}");
        assert!(e.to_string().contains("not Ethernet"), "{e}");
    }

    #[test]
    fn truncated_last_record_is_reported_after_the_frames_before_it() {
        let (a, b) = (frame(1, 1), frame(2, 2));
        let bytes = pcap_bytes(false, false, 1, &[(1, 0, &a), (2, 0, &b)]);
        // Cut inside the second record's data, then inside its header.
        for cut in [bytes.len() - 1, 24 + 16 + 60 + 7] {
            let (frames, err) = read_all(&bytes[..cut]);
            assert_eq!(frames.len(), 1);
            assert_eq!(frames[0].data, a);
            match err {
                Some(PcapInError::TruncatedRecord {
                    record: 2,
                    offset: 100,
                }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn impossible_captured_length_is_a_corrupt_record() {
        let a = frame(1, 1);
        let mut bytes = pcap_bytes(false, false, 1, &[(1, 0, &a)]);
        let big = vec![0u8; 300_000];
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        bytes.extend_from_slice(&(big.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(big.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&big);
        let (frames, err) = read_all(&bytes);
        assert_eq!(frames.len(), 1);
        match err {
            Some(PcapInError::BadRecord {
                record: 2,
                offset: 100,
                reason,
            }) => {
                assert!(reason.contains("snapshot length"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn record_too_large_to_buffer_is_corrupt_not_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let a = frame(1, 1);
        let mut bytes = pcap_bytes(false, false, 1, &[(1, 0, &a)]);
        let huge = 9_000_000u32;
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&huge.to_le_bytes());
        bytes.extend_from_slice(&huge.to_le_bytes());
        bytes.resize(bytes.len() + huge as usize, 0);
        let path = dir.path().join("huge.pcap");
        fs::write(&path, &bytes).unwrap();
        let mut r = PcapIn::open(&path).unwrap();
        let mut f = PcapFrame::default();
        assert!(r.read_frame(&mut f).unwrap());
        match r.read_frame(&mut f) {
            Err(PcapInError::BadRecord {
                record: 2,
                offset: 100,
                reason,
            }) => {
                assert!(reason.contains("too large"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // The same record cut short is a truncation.
        bytes.truncate(bytes.len() - 1);
        fs::write(&path, &bytes).unwrap();
        let mut r = PcapIn::open(&path).unwrap();
        assert!(r.read_frame(&mut f).unwrap());
        assert!(matches!(
            r.read_frame(&mut f),
            Err(PcapInError::TruncatedRecord {
                record: 2,
                offset: 100
            })
        ));
    }

    #[test]
    fn forward_writes_byte_identical_records_to_each_port_file() {
        let routes = vec![
            (1, [2u8, 0, 0, 0, 0, 1], Action::Port(1)),
            (2, [2u8, 0, 0, 0, 0, 2], Action::PortSet(vec![1, 2])),
            (3, [2u8, 0, 0, 0, 0, 3], Action::Controller),
            (4, [2u8, 0, 0, 0, 0, 4], Action::Drop),
        ];
        let cfg = Config {
            check_bits: 16,
            ..Config::default()
        };
        let fib = ConciseFib::build(cfg, &routes).unwrap();
        let q = fib.othello().export(0);
        let mut p = Pipeline::new(
            &q,
            fib.action_table(),
            KeyType::Mac,
            PipelineConfig::default(),
        )
        .unwrap();
        // 70 frames (three batches), cycling over the four names and a runt.
        let frames: Vec<Vec<u8>> = (0..70u8)
            .map(|i| {
                if i % 5 == 4 {
                    vec![i; 9]
                } else {
                    frame(i % 5 + 1, i)
                }
            })
            .collect();
        let recs: Vec<(u32, u32, &[u8])> = frames
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, 7, &f[..]))
            .collect();
        let input = pcap_bytes(false, false, 1, &recs);
        let in_records = raw_records(&input);
        let dir = tempfile::tempdir().unwrap();
        let mut pin = PcapIn::new(&input[..]).unwrap();
        let out = PcapPorts::create(dir.path(), pin.header()).unwrap();
        let run = forward_pcap(&mut p, 0, &mut pin, out).unwrap();
        assert!(run.stopped_by.is_none());
        let expect = |pick: &dyn Fn(usize) -> bool| -> Vec<&[u8]> {
            (0..70)
                .filter(|&i| pick(i))
                .map(|i| in_records[i])
                .collect()
        };
        for (file, want) in [
            ("port-1.pcap", expect(&|i| i % 5 == 0 || i % 5 == 1)),
            ("port-2.pcap", expect(&|i| i % 5 == 1)),
            ("controller.pcap", expect(&|i| i % 5 == 2)),
        ] {
            let got = fs::read(dir.path().join(file)).unwrap();
            assert_eq!(&got[..24], &input[..24], "{file}: file header copied");
            assert_eq!(raw_records(&got), want, "{file}");
        }
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["controller.pcap", "port-1.pcap", "port-2.pcap"]);
        let c = &run.counters;
        assert_eq!(
            (c.frames_in, c.forwarded, c.punted, c.dropped),
            (70, 28, 14, 28)
        );
        assert_eq!(c.malformed.total(), 14);
        assert_eq!(
            run.outputs
                .iter()
                .map(|o| (o.port, o.frames))
                .collect::<Vec<_>>(),
            [(Some(1), 28), (Some(2), 14), (None, 14)]
        );
        assert!(run.mpps() >= 0.0);
    }

    #[test]
    fn creating_outputs_removes_only_an_earlier_runs_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "port-3.pcap",
            "controller.pcap",
            "port-x.pcap",
            "notes.txt",
            "port-.pcap",
        ] {
            fs::write(dir.path().join(name), b"old").unwrap();
        }
        let out = PcapPorts::create(dir.path(), PcapHeader::default()).unwrap();
        assert!(out.finish().unwrap().is_empty());
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["notes.txt", "port-.pcap", "port-x.pcap"]);
    }

    #[test]
    fn pipeline_counters_accumulate_across_runs() {
        let routes = vec![(1, [2u8, 0, 0, 0, 0, 1], Action::Port(1))];
        let fib = ConciseFib::build(Config::default(), &routes).unwrap();
        let q = fib.othello().export(0);
        let cfg = PipelineConfig {
            miss: MissPolicy::Flood,
            ..PipelineConfig::default()
        };
        let mut p = Pipeline::new(&q, fib.action_table(), KeyType::Mac, cfg).unwrap();
        let f = frame(1, 0);
        let input = pcap_bytes(false, true, 1, &[(0, 0, &f)]);
        let dir = tempfile::tempdir().unwrap();
        for run in 1..=2u64 {
            let mut pin = PcapIn::new(&input[..]).unwrap();
            let out = PcapPorts::create(dir.path(), pin.header()).unwrap();
            let r = forward_pcap(&mut p, 0, &mut pin, out).unwrap();
            assert_eq!(r.counters.frames_in, 1, "counters of this run only");
            assert_eq!(p.counters().frames_in, run, "the pipeline keeps the total");
        }
    }
}
