//! Parquet: row groups streamed through a [`Converter`], and the prediction writer.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::{ChunkReader, Length};
use rayon::prelude::*;

use crate::arrow::Converter;
use crate::guard::guarded;
use crate::{IoError, ReadOptions, Table};
use sapwood_core::files::OutputFile;

/// Rows per batch when reading; a row group larger than this arrives in several batches.
const BATCH_ROWS: usize = 65_536;

/// Bytes of decoded values a batch may hold: a wide file's batches have fewer rows (a
/// batch of 65,536 rows of 5,000 float columns is 1.3 GB decoded, nulls included; at
/// 100,000 × 5,000 mostly null, 256 MiB batches took peak memory from 2.0 GB to 0.94 GB
/// and reading from 2.0 s to 2.45 s, 64 MiB ones to 0.82 GB and 4.8 s).
const BATCH_BYTES: usize = 256 << 20;

/// Rows per batch for `columns` columns: [`BATCH_ROWS`], fewer where that many rows would
/// pass [`BATCH_BYTES`] at 8 bytes a value (the widest numeric type), at least 1,024.
fn batch_rows(columns: usize) -> usize {
    (BATCH_BYTES / (8 * columns.max(1))).clamp(1_024, BATCH_ROWS)
}

/// Columns a file must have before its batches are decoded by several threads, each a
/// share of the columns (decoding is most of reading a wide file, and one thread did it).
const PARALLEL_COLUMNS: usize = 64;

/// `roots` cut into runs of nearly equal length, one a decoding thread: one run where the
/// columns are few or the pool has one thread.
fn column_parts(roots: &[usize], threads: usize) -> Vec<Vec<usize>> {
    let k = if roots.len() >= PARALLEL_COLUMNS {
        threads.clamp(1, 8)
    } else {
        1
    };
    (0..k)
        .map(|i| roots[roots.len() * i / k..roots.len() * (i + 1) / k].to_vec())
        .collect()
}

/// The file as the Parquet decoder reads it, where reading at the end is an error.
///
/// The decoder skips unknown Thrift fields of page headers by reading, and takes an empty
/// read as a skip done; a corrupt header that declares a list of 2^31 strings at the end
/// of the file then costs 2^31 empty reads (minutes) before the decoder notices anything.
/// No page of a well-formed file ends the file (the footer follows), so nothing legitimate
/// reads there.
struct EndChecked(File);

/// A reader from [`EndChecked`] or [`Span`]: an empty read into a non-empty buffer is an
/// error.
struct EndIsError<R>(R);

impl<R: Read> Read for EndIsError<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf)? {
            0 if !buf.is_empty() => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a page header runs past the end of the file",
            )),
            n => Ok(n),
        }
    }
}

impl Length for EndChecked {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl ChunkReader for EndChecked {
    type T = EndIsError<BufReader<File>>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        self.0.get_read(start).map(EndIsError)
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<bytes::Bytes, ParquetError> {
        self.0.get_bytes(start, length)
    }
}

/// Largest span of a row group's column chunks read into memory at once (see [`Span`]).
const SPAN_BYTES: u64 = 64 << 20;

/// A row group's column chunks (those read, first to last) read from the file at once.
/// Through the file itself each page costs a duplicated handle, a seek and reads for its
/// header and again for its data: a row group of 5,000 columns made 40,000 such calls.
/// A read outside the span is an error, as one past the file's end is ([`EndChecked`]).
#[derive(Clone)]
struct Span {
    bytes: bytes::Bytes,
    /// where `bytes` start in the file
    start: u64,
    file_len: u64,
}

impl Span {
    /// The index in `bytes` of file offset `start`, where `start..start + length` lies in
    /// the span.
    fn at(&self, start: u64, length: usize) -> Result<usize, ParquetError> {
        let end = self.start + self.bytes.len() as u64;
        match (
            start.checked_sub(self.start),
            start.checked_add(length as u64),
        ) {
            (Some(at), Some(stop)) if stop <= end => Ok(at as usize),
            _ => Err(ParquetError::General(format!(
                "bytes {start}..+{length} lie outside the row group's column chunks"
            ))),
        }
    }
}

impl Length for Span {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for Span {
    type T = EndIsError<bytes::buf::Reader<bytes::Bytes>>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        use bytes::Buf;
        let at = self.at(start, 0)?;
        Ok(EndIsError(self.bytes.slice(at..).reader()))
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<bytes::Bytes, ParquetError> {
        let at = self.at(start, length)?;
        Ok(self.bytes.slice(at..at + length))
    }
}

/// An opened Parquet file: its schema and row groups, read lazily.
#[derive(Debug, Clone)]
pub struct ParquetSource {
    path: PathBuf,
    meta: ArrowReaderMetadata,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |source| IoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A Parquet error at a place in the file (the footer when both are None).
fn parquet_err(
    path: &Path,
    row_group: Option<usize>,
    column: Option<String>,
    reason: String,
) -> IoError {
    IoError::Parquet {
        path: path.to_path_buf(),
        row_group,
        column,
        reason,
    }
}

/// The message for a panic caught in the Parquet decoder.
fn decoder_failed(panic: &str) -> String {
    format!("the Parquet decoder failed ({panic}); the file is probably corrupt")
}

/// Checks what the reader would otherwise trust blindly: row counts are not negative and
/// every column chunk lies inside the file (a flipped byte in the footer could otherwise
/// ask for a huge allocation or a read far past the end).
fn check_footer(path: &Path, meta: &ParquetMetaData, file_len: u64) -> Result<(), IoError> {
    if meta.file_metadata().num_rows() < 0 {
        return Err(parquet_err(
            path,
            None,
            None,
            format!(
                "not a readable Parquet file: the footer gives {} rows",
                meta.file_metadata().num_rows()
            ),
        ));
    }
    for (g, group) in meta.row_groups().iter().enumerate() {
        if group.num_rows() < 0 {
            return Err(parquet_err(
                path,
                Some(g),
                None,
                format!("the footer gives {} rows", group.num_rows()),
            ));
        }
        for chunk in group.columns() {
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or_else(|| chunk.data_page_offset());
            let len = chunk.compressed_size();
            let inside = start >= 0
                && len >= 0
                && (start as u64)
                    .checked_add(len as u64)
                    .is_some_and(|end| end <= file_len);
            if !inside {
                return Err(parquet_err(
                    path,
                    Some(g),
                    Some(chunk.column_path().string()),
                    format!(
                        "corrupt footer: the column chunk at byte {start}, {len} bytes long, \
                         is not inside the file ({file_len} bytes)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl ParquetSource {
    /// Opens `path` and reads its footer; a missing, truncated, foreign or corrupt file is
    /// an error.
    pub fn open(path: &Path) -> Result<Self, IoError> {
        let file = File::open(path).map_err(io_err(path))?;
        let file_len = file.metadata().map_err(io_err(path))?.len();
        let meta = match guarded(|| ArrowReaderMetadata::load(&file, Default::default())) {
            Ok(Ok(meta)) => meta,
            Ok(Err(e)) => {
                return Err(parquet_err(
                    path,
                    None,
                    None,
                    format!("not a readable Parquet file: {e}"),
                ))
            }
            Err(panic) => {
                return Err(parquet_err(
                    path,
                    None,
                    None,
                    format!("not a readable Parquet file: {}", decoder_failed(&panic)),
                ))
            }
        };
        check_footer(path, meta.metadata(), file_len)?;
        Ok(ParquetSource {
            path: path.to_path_buf(),
            meta,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The Arrow schema of the file.
    pub fn schema(&self) -> &Schema {
        self.meta.schema()
    }

    /// Rows in the file: the sum over its row groups, which is what reading yields.
    pub fn num_rows(&self) -> u64 {
        self.row_group_rows().iter().sum()
    }

    /// Rows of each row group.
    pub fn row_group_rows(&self) -> Vec<u64> {
        self.meta
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.num_rows().max(0) as u64)
            .collect()
    }

    /// Batches of the columns `columns` (all when empty) of the row groups `row_groups`
    /// (all when None), in file order; no batch spans two row groups.
    pub fn batches(
        &self,
        columns: &[String],
        row_groups: Option<Vec<usize>>,
    ) -> Result<Batches, IoError> {
        let n_groups = self.meta.metadata().num_row_groups();
        let groups: VecDeque<usize> = match row_groups {
            Some(groups) => {
                if let Some(&g) = groups.iter().find(|&&g| g >= n_groups) {
                    return Err(parquet_err(
                        &self.path,
                        Some(g),
                        None,
                        format!("no such row group (the file has {n_groups})"),
                    ));
                }
                groups.into()
            }
            None => (0..n_groups).collect(),
        };
        // a set: a file of 5,000 columns would compare every name with every other
        let wanted: std::collections::HashSet<&str> = columns.iter().map(String::as_str).collect();
        let roots: Vec<usize> = self
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| columns.is_empty() || wanted.contains(f.name().as_str()))
            .map(|(i, _)| i)
            .collect();
        Ok(Batches {
            source: self.clone(),
            roots,
            groups,
            current: None,
            failed: false,
        })
    }

    /// The column chunks of `roots` in row group `group` read into memory, where their
    /// span is at most [`SPAN_BYTES`] and lies in the file; `None` to read from the file.
    fn span(&self, roots: &[usize], group: usize) -> Result<Option<Span>, IoError> {
        let meta = self.meta.metadata();
        let file_len = std::fs::metadata(&self.path)
            .map_err(io_err(&self.path))?
            .len();
        let schema = meta.file_metadata().schema_descr();
        let rg = meta.row_group(group);
        // a mask by root: `contains` on 5,000 roots for every leaf would be quadratic
        let mut read = vec![false; self.schema().fields().len()];
        for &r in roots {
            if let Some(m) = read.get_mut(r) {
                *m = true;
            }
        }
        let mut range: Option<(u64, u64)> = None;
        for (leaf, col) in rg.columns().iter().enumerate() {
            let wanted = leaf < schema.num_columns()
                && read
                    .get(schema.get_column_root_idx(leaf))
                    .copied()
                    .unwrap_or(false);
            if !wanted {
                continue;
            }
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset());
            let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(col.compressed_size()))
            else {
                return Ok(None);
            };
            let Some(end) = start.checked_add(len) else {
                return Ok(None);
            };
            range = Some(range.map_or((start, end), |(a, b)| (a.min(start), b.max(end))));
        }
        let Some((start, end)) = range else {
            return Ok(None);
        };
        if end > file_len || end - start > SPAN_BYTES {
            return Ok(None);
        }
        let mut file = File::open(&self.path).map_err(io_err(&self.path))?;
        let mut bytes = vec![0u8; (end - start) as usize];
        io::Seek::seek(&mut file, io::SeekFrom::Start(start)).map_err(io_err(&self.path))?;
        file.read_exact(&mut bytes).map_err(io_err(&self.path))?;
        Ok(Some(Span {
            bytes: bytes.into(),
            start,
            file_len,
        }))
    }

    /// A reader of the root columns `roots` of row group `group`, `rows` rows a batch,
    /// from `span` where given, else from the file.
    fn group_reader(
        &self,
        roots: &[usize],
        group: usize,
        rows: usize,
        span: Option<&Span>,
    ) -> Result<Result<ParquetRecordBatchReader, ParquetError>, IoError> {
        match span {
            Some(span) => self.reader_of(span.clone(), roots, group, rows),
            None => {
                let file = File::open(&self.path).map_err(io_err(&self.path))?;
                self.reader_of(EndChecked(file), roots, group, rows)
            }
        }
    }

    /// [`ParquetSource::group_reader`] over `chunks`.
    fn reader_of<C: ChunkReader + 'static>(
        &self,
        chunks: C,
        roots: &[usize],
        group: usize,
        rows: usize,
    ) -> Result<Result<ParquetRecordBatchReader, ParquetError>, IoError> {
        guarded(|| {
            let builder =
                ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, self.meta.clone())
                    .with_batch_size(rows)
                    .with_row_groups(vec![group]);
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
            builder.with_projection(mask).build()
        })
        .map_err(|panic| parquet_err(&self.path, Some(group), None, decoder_failed(&panic)))
    }

    /// Names the column that fails to decode in row group `group`: each of `roots` is read
    /// alone; the first that fails gives the error. Only runs once reading has failed.
    fn locate_failure(&self, roots: &[usize], group: usize, reason: String) -> IoError {
        for &root in roots {
            let name = self.schema().field(root).name().clone();
            let fails = match self.group_reader(&[root], group, batch_rows(1), None) {
                Err(_) | Ok(Err(_)) => true,
                Ok(Ok(mut reader)) => loop {
                    match guarded(|| reader.next()) {
                        Ok(None) => break false,
                        Ok(Some(Ok(_))) => {}
                        Ok(Some(Err(_))) | Err(_) => break true,
                    }
                },
            };
            if fails {
                return parquet_err(&self.path, Some(group), Some(name), reason);
            }
        }
        parquet_err(&self.path, Some(group), None, reason)
    }

    /// A converter for this file's columns.
    pub fn converter(&self, opts: &ReadOptions) -> Result<Converter, IoError> {
        Converter::new(&self.path, self.schema(), opts)
    }
}

/// Record batches streamed from a Parquet file, row group by row group. After an error
/// the iteration ends.
pub struct Batches {
    source: ParquetSource,
    roots: Vec<usize>,
    groups: VecDeque<usize>,
    /// the row group being read, by one reader a run of the columns (see [`column_parts`])
    current: Option<(usize, Vec<ParquetRecordBatchReader>)>,
    failed: bool,
}

impl Batches {
    /// Ends the iteration with the error of row group `group`, naming the column at fault.
    fn fail(&mut self, group: usize, reason: String) -> Option<Result<RecordBatch, IoError>> {
        self.failed = true;
        self.current = None;
        Some(Err(self.source.locate_failure(&self.roots, group, reason)))
    }
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, IoError>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            let (group, readers) = match &mut self.current {
                Some((g, r)) => (*g, r),
                None => {
                    let group = self.groups.pop_front()?;
                    let parts = column_parts(&self.roots, rayon::current_num_threads());
                    let rows = batch_rows(self.roots.len());
                    let span = match self.source.span(&self.roots, group) {
                        Ok(span) => span,
                        Err(e) => {
                            self.failed = true;
                            return Some(Err(e));
                        }
                    };
                    let mut readers = Vec::with_capacity(parts.len());
                    for part in &parts {
                        match self.source.group_reader(part, group, rows, span.as_ref()) {
                            Ok(Ok(r)) => readers.push(r),
                            Ok(Err(e)) => {
                                return self.fail(group, format!("corrupt or truncated data: {e}"))
                            }
                            Err(e) => {
                                self.failed = true;
                                return Some(Err(e));
                            }
                        }
                    }
                    self.current = Some((group, readers));
                    continue;
                }
            };
            // every reader reads the same rows (one row group, one batch size)
            let read: Vec<_> = readers
                .par_iter_mut()
                .map(|r| guarded(|| r.next()))
                .collect();
            let mut parts = Vec::with_capacity(read.len());
            for r in read {
                match r {
                    Ok(Some(Ok(batch))) => parts.push(batch),
                    Ok(None) => {}
                    Ok(Some(Err(e))) => {
                        return self.fail(group, format!("corrupt or truncated data: {e}"))
                    }
                    Err(panic) => return self.fail(group, decoder_failed(&panic)),
                }
            }
            if parts.is_empty() {
                self.current = None;
                continue;
            }
            if parts.len() == 1 && readers.len() == 1 {
                return parts.pop().map(Ok);
            }
            match joined(&parts, readers.len()) {
                Ok(batch) => return Some(Ok(batch)),
                Err(reason) => return self.fail(group, reason),
            }
        }
    }
}

/// The batches of `readers` runs of the columns, read over the same rows, as one batch
/// of every column in order.
fn joined(parts: &[RecordBatch], readers: usize) -> Result<RecordBatch, String> {
    let rows = parts[0].num_rows();
    if parts.len() != readers || parts.iter().any(|b| b.num_rows() != rows) {
        return Err("the columns of a row group hold different numbers of rows".into());
    }
    let fields: Vec<_> = parts
        .iter()
        .flat_map(|b| b.schema().fields().iter().cloned().collect::<Vec<_>>())
        .collect();
    let columns: Vec<ArrayRef> = parts
        .iter()
        .flat_map(|b| b.columns().iter().cloned())
        .collect();
    let metadata = parts[0].schema().metadata().clone();
    let schema = Schema::new_with_metadata(fields, metadata);
    RecordBatch::try_new(Arc::new(schema), columns).map_err(|e| e.to_string())
}

/// Reads a whole Parquet file into memory (for small data; large files should stream).
pub fn read_parquet(path: &Path, opts: &ReadOptions) -> Result<Table, IoError> {
    let source = ParquetSource::open(path)?;
    let mut conv = source.converter(opts)?;
    let parts = source
        .batches(&conv.columns(), None)?
        .map(|b| b.and_then(|b| conv.convert(&b)))
        .collect::<Result<Vec<_>, _>>()?;
    if parts.is_empty() {
        let empty = RecordBatch::new_empty(Arc::new(source.schema().clone()));
        return conv.convert(&empty);
    }
    Table::concat(path, parts, &conv.feature_names())
}

/// Runs a call into the Parquet writer; its error, or a panic in it, is a write error.
fn writing<T, E: std::fmt::Display>(
    path: &Path,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, IoError> {
    let err = |reason: String| IoError::Write {
        path: path.to_path_buf(),
        reason,
    };
    guarded(f).map_err(err)?.map_err(|e| err(e.to_string()))
}

/// Writes predictions as Parquet through an [`OutputFile`]: a temporary renamed over a
/// regular file on [`finish`] (so a failure never leaves a partial file under the requested
/// name, nor a temporary beside it), or a device, FIFO or link's target written in place.
///
/// [`finish`]: PredictionWriter::finish
pub struct PredictionWriter {
    path: PathBuf,
    schema: SchemaRef,
    writer: ArrowWriter<OutputFile>,
}

impl PredictionWriter {
    /// A writer of columns `fields` (name, type), e.g. kept ids then `prediction`.
    pub fn create(path: &Path, fields: &[(String, DataType)]) -> Result<Self, IoError> {
        let fields: Vec<Field> = fields
            .iter()
            .map(|(n, t)| Field::new(n, t.clone(), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let file = OutputFile::create(path).map_err(io_err(path))?;
        // dropped on error, the output file removes its temporary
        let writer = writing(path, || ArrowWriter::try_new(file, schema.clone(), None))?;
        Ok(PredictionWriter {
            path: path.to_path_buf(),
            schema,
            writer,
        })
    }

    /// Appends rows: one array per field.
    pub fn write(&mut self, arrays: Vec<ArrayRef>) -> Result<(), IoError> {
        let schema = self.schema.clone();
        let w = &mut self.writer;
        writing(&self.path, || {
            let batch = RecordBatch::try_new(schema, arrays).map_err(|e| e.to_string())?;
            w.write(&batch).map_err(|e| e.to_string())
        })
    }

    /// Writes the footer and makes the file final. On any failure (a full disk while the
    /// last row group or the footer is written, a failed rename) nothing is left behind.
    pub fn finish(self) -> Result<(), IoError> {
        let path = self.path;
        let file = writing(&path, || self.writer.into_inner())?;
        file.commit().map_err(io_err(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_files_are_read_in_fewer_rows_a_batch() {
        assert_eq!(batch_rows(28), BATCH_ROWS);
        assert_eq!(batch_rows(0), BATCH_ROWS);
        // 5,000 columns: 256 MiB / 40,000 bytes a row
        assert_eq!(batch_rows(5_000), 6_710);
        assert_eq!(batch_rows(1_000_000), 1_024);
    }

    #[test]
    fn a_span_serves_reads_within_it_and_refuses_the_rest() {
        let span = Span {
            bytes: (10u8..20).collect::<Vec<u8>>().into(),
            start: 10,
            file_len: 100,
        };
        assert_eq!(Length::len(&span), 100, "the file's length");
        assert_eq!(&span.get_bytes(12, 3).unwrap()[..], &[12, 13, 14]);
        assert_eq!(span.get_bytes(10, 10).unwrap().len(), 10);
        for (start, length) in [(15, 6), (9, 1), (30, 0), (u64::MAX, 1)] {
            assert!(span.get_bytes(start, length).is_err(), "{start}+{length}");
        }
        let mut read = span.get_read(18).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(read.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], &[18, 19]);
        // a read at the span's end is an error, not an empty read the decoder would repeat
        assert!(read.read(&mut buf).is_err());
        assert!(span.get_read(9).is_err());
    }

    #[test]
    fn wide_files_are_decoded_in_runs_of_columns_one_a_thread() {
        let roots: Vec<usize> = (3..203).collect();
        for threads in [1, 2, 3, 16] {
            let parts = column_parts(&roots, threads);
            assert_eq!(parts.len(), threads.min(8));
            assert_eq!(parts.concat(), roots, "every column once, in order");
            let (lo, hi) = (
                parts.iter().map(Vec::len).min().unwrap(),
                parts.iter().map(Vec::len).max().unwrap(),
            );
            assert!(hi - lo <= 1, "{threads}: {lo}..{hi}");
        }
        assert_eq!(column_parts(&roots[..10], 4), vec![roots[..10].to_vec()]);
    }
}
