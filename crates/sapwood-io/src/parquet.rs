//! Parquet: row groups streamed through a [`Converter`], and the prediction writer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::file::metadata::ParquetMetaData;

use crate::arrow::Converter;
use crate::{IoError, ReadOptions, Table};

/// Rows per batch when reading; a row group larger than this arrives in several batches.
const BATCH_ROWS: usize = 65_536;

/// An opened Parquet file: its schema and row groups, read lazily.
#[derive(Debug, Clone)]
pub struct ParquetSource {
    path: PathBuf,
    metadata: Arc<ParquetMetaData>,
    schema: SchemaRef,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> IoError + '_ {
    move |source| IoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn parquet_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> IoError + '_ {
    move |e| IoError::Parse {
        path: path.to_path_buf(),
        line: 0,
        reason: format!("not a readable Parquet file: {e}"),
    }
}

impl ParquetSource {
    /// Opens `path` and reads its footer; a missing, truncated or foreign file is an error.
    pub fn open(path: &Path) -> Result<Self, IoError> {
        let file = File::open(path).map_err(io_err(path))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err(path))?;
        Ok(ParquetSource {
            path: path.to_path_buf(),
            metadata: builder.metadata().clone(),
            schema: builder.schema().clone(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The Arrow schema of the file.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Rows in the file.
    pub fn num_rows(&self) -> u64 {
        self.metadata.file_metadata().num_rows().max(0) as u64
    }

    /// Rows of each row group.
    pub fn row_group_rows(&self) -> Vec<u64> {
        self.metadata
            .row_groups()
            .iter()
            .map(|g| g.num_rows().max(0) as u64)
            .collect()
    }

    /// Batches of the columns `columns` (all when empty) of the row groups `row_groups`
    /// (all when None), in file order.
    pub fn batches(
        &self,
        columns: &[String],
        row_groups: Option<Vec<usize>>,
    ) -> Result<Batches, IoError> {
        let file = File::open(&self.path).map_err(io_err(&self.path))?;
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(parquet_err(&self.path))?
            .with_batch_size(BATCH_ROWS);
        if !columns.is_empty() {
            let roots: Vec<usize> = self
                .schema
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| columns.contains(f.name()))
                .map(|(i, _)| i)
                .collect();
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder = builder.with_projection(mask);
        }
        if let Some(groups) = row_groups {
            builder = builder.with_row_groups(groups);
        }
        Ok(Batches {
            path: self.path.clone(),
            reader: builder.build().map_err(parquet_err(&self.path))?,
        })
    }

    /// A converter for this file's columns.
    pub fn converter(&self, opts: &ReadOptions) -> Result<Converter, IoError> {
        Converter::new(&self.path, &self.schema, opts)
    }
}

/// Record batches streamed from a Parquet file.
pub struct Batches {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
}

impl Iterator for Batches {
    type Item = Result<RecordBatch, IoError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.reader.next().map(|r| {
            r.map_err(|e| IoError::Parse {
                path: self.path.clone(),
                line: 0,
                reason: format!("corrupt or truncated data: {e}"),
            })
        })
    }
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

/// Writes predictions as Parquet to a temporary file renamed into place on [`finish`]
/// (so a failure never leaves a partial file under the requested name).
///
/// [`finish`]: PredictionWriter::finish
pub struct PredictionWriter {
    path: PathBuf,
    tmp: PathBuf,
    schema: SchemaRef,
    writer: Option<ArrowWriter<File>>,
}

impl PredictionWriter {
    /// A writer of columns `fields` (name, type), e.g. kept ids then `prediction`.
    pub fn create(path: &Path, fields: &[(String, DataType)]) -> Result<Self, IoError> {
        let fields: Vec<Field> = fields
            .iter()
            .map(|(n, t)| Field::new(n, t.clone(), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let tmp = sapwood_core::files::temporary_beside(path);
        let file = File::create(&tmp).map_err(io_err(path))?;
        let writer =
            ArrowWriter::try_new(file, schema.clone(), None).map_err(|e| IoError::Parse {
                path: path.to_path_buf(),
                line: 0,
                reason: format!("cannot write Parquet: {e}"),
            })?;
        Ok(PredictionWriter {
            path: path.to_path_buf(),
            tmp,
            schema,
            writer: Some(writer),
        })
    }

    /// Appends rows: one array per field.
    pub fn write(&mut self, arrays: Vec<ArrayRef>) -> Result<(), IoError> {
        let err = |e: String| IoError::Parse {
            path: self.path.clone(),
            line: 0,
            reason: format!("cannot write Parquet: {e}"),
        };
        let batch =
            RecordBatch::try_new(self.schema.clone(), arrays).map_err(|e| err(e.to_string()))?;
        let w = self
            .writer
            .as_mut()
            .expect("the writer is open until finish");
        w.write(&batch).map_err(|e| err(e.to_string()))
    }

    /// Closes the file and renames it into place.
    pub fn finish(mut self) -> Result<(), IoError> {
        let w = self.writer.take().expect("finish is called once");
        w.close().map_err(|e| IoError::Parse {
            path: self.path.clone(),
            line: 0,
            reason: format!("cannot write Parquet: {e}"),
        })?;
        std::fs::rename(&self.tmp, &self.path).map_err(io_err(&self.path))
    }
}

impl Drop for PredictionWriter {
    fn drop(&mut self) {
        // not finished: an error happened, so leave nothing behind
        if self.writer.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
