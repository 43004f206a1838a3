//! Parquet files written by pyarrow (every codec), pandas and polars read back exactly.

use std::path::PathBuf;

use sapwood_core::data::Column;
use sapwood_io::{read_parquet, LabelColumn, ParquetSource, ReadOptions};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn expected() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("expected.json")).unwrap())
        .unwrap()
}

fn check(file: &str) {
    let path = fixtures().join(file);
    let t = read_parquet(
        &path,
        &ReadOptions {
            label: Some("y".into()),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let want = expected();
    let mut checked = 0;
    for (name, col) in t.features.names().iter().zip(t.features.columns()) {
        let w = want[name]
            .as_array()
            .unwrap_or_else(|| panic!("{file}: unexpected column {name}"));
        match col {
            Column::Numeric(v) => {
                assert_eq!(v.len(), w.len(), "{file}:{name}");
                for (i, (got, w)) in v.iter().zip(w).enumerate() {
                    match w.as_f64() {
                        None => assert!(
                            got.is_nan(),
                            "{file}:{name}[{i}] should be missing, got {got}"
                        ),
                        Some(x) => assert_eq!(*got, x as f32, "{file}:{name}[{i}]"),
                    }
                }
            }
            Column::Categorical { codes, levels } => {
                for (i, (&c, w)) in codes.iter().zip(w).enumerate() {
                    let got = (c != sapwood_core::data::MISSING_CATEGORY)
                        .then(|| levels[c as usize].as_str());
                    assert_eq!(got, w.as_str(), "{file}:{name}[{i}]");
                }
            }
            Column::Sparse { .. } => panic!("{file}:{name}: the reader writes dense columns"),
        }
        checked += 1;
    }
    let f16 = t.features.names().iter().any(|n| n == "f16");
    assert_eq!(
        checked,
        if f16 { 15 } else { 14 },
        "{file}: every column was read"
    );
    match t.label {
        Some(LabelColumn::Numeric(y)) => {
            assert_eq!(y, (0..40).map(|i| (i % 3) as f32).collect::<Vec<_>>())
        }
        other => panic!("{file}: label {other:?}"),
    }
}

#[test]
fn pyarrow_files_with_every_codec_read_exactly() {
    for codec in ["none", "snappy", "zstd", "gzip", "lz4"] {
        check(&format!("pyarrow_{codec}.parquet"));
    }
}

#[test]
fn pandas_nullable_and_categorical_columns_read_exactly() {
    check("pandas.parquet");
}

#[test]
fn polars_files_read_exactly() {
    check("polars.parquet");
}

#[test]
fn row_groups_stream_in_order() {
    let source = ParquetSource::open(&fixtures().join("pyarrow_zstd.parquet")).unwrap();
    assert_eq!(source.num_rows(), 40);
    assert_eq!(source.row_group_rows(), vec![16, 16, 8]);
    let rows: usize = source
        .batches(&["f64".to_string()], Some(vec![1, 2]))
        .unwrap()
        .map(|b| b.unwrap().num_rows())
        .sum();
    assert_eq!(rows, 24);
}

#[test]
fn truncated_and_foreign_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixtures().join("pyarrow_snappy.parquet")).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = read_parquet(&cut, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cut.parquet") && e.contains("Parquet"), "{e}");
    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, b"this is not parquet at all, not even close").unwrap();
    let e = read_parquet(&junk, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("junk.parquet"), "{e}");
    let e = read_parquet(&dir.path().join("absent.parquet"), &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.parquet"), "{e}");
    let e = read_parquet(
        &fixtures().join("polars.parquet"),
        &ReadOptions {
            label: Some("nope".into()),
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("no column `nope`"), "{e}");
}

// ---- files written here with parquet's own ArrowWriter -------------------------------

use std::path::Path;
use std::sync::Arc;

use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use sapwood_io::arrow_array::types::Int32Type;
use sapwood_io::arrow_array::{
    ArrayRef, BooleanArray, DictionaryArray, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array, Int8Array, RecordBatch, StringArray, UInt16Array, UInt32Array, UInt64Array,
    UInt8Array,
};
use sapwood_io::arrow_schema::{Field, Schema};
use sapwood_io::IoError;

/// A record batch of named columns (all nullable).
fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap()
}

/// The Parquet bytes of `batch`, in row groups of at most `group_rows` rows.
fn parquet_bytes(batch: &RecordBatch, group_rows: usize, compression: Compression) -> Vec<u8> {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group_rows))
        .set_compression(compression)
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    out
}

/// The level name of every row of categorical feature `name` (None where missing).
fn level_names(t: &sapwood_io::Table, name: &str) -> Vec<Option<String>> {
    let j = t.features.names().iter().position(|n| n == name).unwrap();
    match t.features.column(j) {
        Column::Categorical { codes, levels } => codes
            .iter()
            .map(|&c| {
                (c != sapwood_core::data::MISSING_CATEGORY).then(|| levels[c as usize].clone())
            })
            .collect(),
        Column::Numeric(_) | Column::Sparse { .. } => panic!("{name} should be categorical"),
    }
}

#[test]
fn integer_categorical_levels_are_exact_for_every_integer_type() {
    let big = [16_777_216i64, 16_777_217, 1 << 62, (1 << 62) + 1, i64::MIN];
    let dict_keys = Int32Array::from(vec![0, 1, 2, 3, 4]);
    let dict =
        DictionaryArray::<Int32Type>::try_new(dict_keys, Arc::new(Int64Array::from(big.to_vec())))
            .unwrap();
    let b = batch(vec![
        (
            "i8",
            Arc::new(Int8Array::from(vec![i8::MIN, -1, 0, 1, i8::MAX])) as ArrayRef,
        ),
        (
            "i16",
            Arc::new(Int16Array::from(vec![i16::MIN, -1, 0, 1, i16::MAX])),
        ),
        (
            "i32",
            Arc::new(Int32Array::from(vec![
                i32::MIN,
                16_777_216,
                16_777_217,
                1,
                i32::MAX,
            ])),
        ),
        ("i64", Arc::new(Int64Array::from(big.to_vec()))),
        ("u8", Arc::new(UInt8Array::from(vec![0, 1, 2, 3, u8::MAX]))),
        (
            "u16",
            Arc::new(UInt16Array::from(vec![0, 1, 2, 3, u16::MAX])),
        ),
        (
            "u32",
            Arc::new(UInt32Array::from(vec![
                0,
                16_777_216,
                16_777_217,
                3,
                u32::MAX,
            ])),
        ),
        (
            "u64",
            Arc::new(UInt64Array::from(vec![
                Some(16_777_216),
                Some(16_777_217),
                Some(u64::MAX),
                Some(u64::MAX - 1),
                None,
            ])),
        ),
        ("dict_i64", Arc::new(dict)),
        (
            "f64",
            Arc::new(Float64Array::from(vec![
                16_777_217.0,
                16_777_216.0,
                0.1,
                -2.0,
                1e300,
            ])),
        ),
        (
            "y",
            Arc::new(Float32Array::from(vec![0.0, 1.0, 0.0, 1.0, 0.0])),
        ),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ints.parquet");
    std::fs::write(&path, parquet_bytes(&b, 1024, Compression::UNCOMPRESSED)).unwrap();
    let names = [
        "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "dict_i64", "f64",
    ];
    let t = read_parquet(
        &path,
        &ReadOptions {
            label: Some("y".into()),
            categorical: names.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        },
    )
    .unwrap();
    let want = |v: Vec<&str>| {
        v.into_iter()
            .map(|s| Some(s.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        level_names(&t, "i8"),
        want(vec!["-128", "-1", "0", "1", "127"])
    );
    assert_eq!(
        level_names(&t, "i16"),
        want(vec!["-32768", "-1", "0", "1", "32767"])
    );
    assert_eq!(
        level_names(&t, "i32"),
        want(vec![
            "-2147483648",
            "16777216",
            "16777217",
            "1",
            "2147483647"
        ])
    );
    let big_text = want(vec![
        "16777216",
        "16777217",
        "4611686018427387904",
        "4611686018427387905",
        "-9223372036854775808",
    ]);
    assert_eq!(level_names(&t, "i64"), big_text);
    assert_eq!(level_names(&t, "dict_i64"), big_text);
    assert_eq!(level_names(&t, "u8"), want(vec!["0", "1", "2", "3", "255"]));
    assert_eq!(
        level_names(&t, "u16"),
        want(vec!["0", "1", "2", "3", "65535"])
    );
    assert_eq!(
        level_names(&t, "u32"),
        want(vec!["0", "16777216", "16777217", "3", "4294967295"])
    );
    let mut u64s = want(vec![
        "16777216",
        "16777217",
        "18446744073709551615",
        "18446744073709551614",
    ]);
    u64s.push(None);
    assert_eq!(level_names(&t, "u64"), u64s);
    // floats keep their own precision too: 16777217.0 is not 16777216.0 in an f64
    let f = level_names(&t, "f64");
    assert_eq!(f[0].as_deref(), Some("16777217"));
    assert_eq!(f[1].as_deref(), Some("16777216"));
    assert_eq!(f[2].as_deref(), Some("0.1"));
    assert_eq!(f[3].as_deref(), Some("-2"));
    // every distinct value is its own level
    for name in names {
        let j = t.features.names().iter().position(|n| n == name).unwrap();
        if let Column::Categorical { levels, .. } = t.features.column(j) {
            assert_eq!(
                levels.len(),
                5 - usize::from(name == "u64"),
                "{name}: {levels:?}"
            );
        }
    }
}

/// Every read a command makes: footer, schema, row counts, each batch and its conversion,
/// then a subset of the row groups with every column.
fn read_everything(path: &Path) -> Result<usize, IoError> {
    let opts = ReadOptions {
        label: Some("y".into()),
        categorical: vec!["code".into()],
        ..Default::default()
    };
    let source = ParquetSource::open(path)?;
    let _ = (source.schema().fields().len(), source.num_rows());
    let groups = source.row_group_rows();
    let mut conv = source.converter(&opts)?;
    let mut rows = 0;
    for b in source.batches(&conv.columns(), None)? {
        rows += conv.convert(&b?)?.n_rows();
    }
    // one worker's share of the row groups, as a distributed run reads it
    for b in source.batches(&[], Some((1..groups.len()).collect()))? {
        b?;
    }
    Ok(rows)
}

/// A small file of every kind of column: nulls, dictionary strings, integers forced
/// categorical, booleans, floats; three row groups.
fn small_table() -> RecordBatch {
    let n = 48;
    let words = ["red", "green", "blue", "cyan", "magenta"];
    let dict: DictionaryArray<Int32Type> = (0..n)
        .map(|i| (i % 7 != 3).then_some(words[i % 5]))
        .collect();
    batch(vec![
        (
            "x",
            Arc::new(Float32Array::from_iter(
                (0..n).map(|i| (i % 9 != 4).then_some(i as f32 * 0.5)),
            )) as ArrayRef,
        ),
        (
            "k",
            Arc::new(Int64Array::from_iter(
                (0..n).map(|i| Some(i as i64 * 1000 - 7)),
            )),
        ),
        (
            "code",
            Arc::new(Int32Array::from_iter((0..n).map(|i| Some((i % 4) as i32)))),
        ),
        ("s", Arc::new(dict)),
        (
            "t",
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 5 != 0).then(|| format!("w{}", i % 3))),
            )),
        ),
        (
            "b",
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
        ),
        (
            "y",
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| (i % 2) as f64),
            )),
        ),
    ])
}

#[test]
fn corrupt_bytes_anywhere_give_errors_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flipped.parquet");
    let mut attempts = 0;
    let mut errors = 0;
    let mut panics = Vec::new();
    for compression in [Compression::UNCOMPRESSED, Compression::SNAPPY] {
        let good = parquet_bytes(&small_table(), 20, compression);
        std::fs::write(&path, &good).unwrap();
        assert_eq!(read_everything(&path).unwrap(), 48, "the clean file reads");
        // every byte with all its bits flipped, every byte of the uncompressed file with
        // its low bit flipped (lengths and offsets off by one), and pseudo-random pairs
        let mut cases: Vec<Vec<(usize, u8)>> = Vec::new();
        for i in 0..good.len() {
            cases.push(vec![(i, 0xFF)]);
            if compression == Compression::UNCOMPRESSED {
                cases.push(vec![(i, 0x01)]);
            }
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..1000 {
            let (a, b) = (next() as usize % good.len(), next() as usize % good.len());
            cases.push(vec![
                (a, (next() % 255 + 1) as u8),
                (b, (next() % 255 + 1) as u8),
            ]);
        }
        for case in cases {
            let mut bytes = good.clone();
            for &(i, mask) in &case {
                bytes[i] ^= mask;
            }
            std::fs::write(&path, &bytes).unwrap();
            attempts += 1;
            match std::panic::catch_unwind(|| read_everything(&path)) {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    errors += 1;
                    let msg = e.to_string();
                    assert!(msg.contains("flipped.parquet"), "{case:?}: {msg}");
                }
                Err(_) => panics.push((compression, case)),
            }
        }
    }
    assert!(
        panics.is_empty(),
        "{} of {attempts} reads panicked: {:?}",
        panics.len(),
        &panics[..panics.len().min(20)]
    );
    // the flips must actually reach the decoder: most of them break the file
    assert!(
        errors > attempts / 4,
        "only {errors} of {attempts} corrupt files were errors"
    );
}

/// `good` (the bytes of the file at `path`) with the chunk of leaf column `column` in row
/// group `group` overwritten with 0xFF.
fn garbled_chunk(path: &Path, good: &[u8], group: usize, column: usize) -> Vec<u8> {
    let meta = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap();
    let chunk = parquet::file::reader::FileReader::metadata(&meta)
        .row_group(group)
        .column(column)
        .clone();
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset()) as usize;
    let mut bad = good.to_vec();
    for b in &mut bad[start..start + chunk.compressed_size() as usize] {
        *b = 0xFF;
    }
    bad
}

#[test]
fn a_corrupt_column_chunk_is_named_by_row_group_and_column() {
    let good = parquet_bytes(&small_table(), 20, Compression::SNAPPY);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad_chunk.parquet");
    std::fs::write(&path, &good).unwrap();
    let source = ParquetSource::open(&path).unwrap();
    let s = source.schema().index_of("s").unwrap();
    // the chunk of column `s` in row group 1, overwritten with garbage
    let bad = garbled_chunk(&path, &good, 1, s);
    std::fs::write(&path, &bad).unwrap();
    let Err(e) = read_parquet(&path, &ReadOptions::default()) else {
        panic!("a garbage column chunk is an error");
    };
    let e = e.to_string();
    assert!(
        e.contains("bad_chunk.parquet") && e.contains("row group 1, column `s`"),
        "{e}"
    );
    assert!(!e.contains("line 0"), "{e}");
    // the first row group is still read before the error arrives
    let source = ParquetSource::open(&path).unwrap();
    let mut batches = source.batches(&[], None).unwrap();
    assert_eq!(batches.next().unwrap().unwrap().num_rows(), 20);
    assert!(batches.next().unwrap().is_err());
    assert!(
        batches.next().is_none(),
        "the iteration ends after an error"
    );
}

#[test]
fn a_footer_pointing_outside_the_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent_groups.parquet");
    let n = 5000;
    let b = batch(vec![
        (
            "x",
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| i as f64 * 0.37),
            )) as ArrayRef,
        ),
        (
            "y",
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| (i % 2) as f64),
            )),
        ),
    ]);
    let good = parquet_bytes(&b, 2500, Compression::UNCOMPRESSED);
    // keep the footer but drop the data it points to
    let footer_len = u32::from_le_bytes(good[good.len() - 8..good.len() - 4].try_into().unwrap());
    let footer = &good[good.len() - 8 - footer_len as usize..];
    let mut bytes = b"PAR1".to_vec();
    bytes.extend_from_slice(footer);
    std::fs::write(&path, &bytes).unwrap();
    let Err(e) = ParquetSource::open(&path) else {
        panic!("a footer pointing past the end is an error");
    };
    let e = e.to_string();
    assert!(
        e.contains("absent_groups.parquet")
            && e.contains("row group 0, column `x`")
            && e.contains("is not inside the file"),
        "{e}"
    );
}

/// A file with `batch`'s columns and no rows: no row group at all, or one empty row group
/// (as pandas and pyarrow write an empty frame).
fn zero_row_files(dir: &Path, b: &RecordBatch) -> Vec<std::path::PathBuf> {
    let none = dir.join("no_groups.parquet");
    let w = ArrowWriter::try_new(std::fs::File::create(&none).unwrap(), b.schema(), None).unwrap();
    w.close().unwrap();
    let empty = dir.join("empty_group.parquet");
    let w = ArrowWriter::try_new(std::fs::File::create(&empty).unwrap(), b.schema(), None).unwrap();
    let (mut file, factory) = w.into_serialized_writer().unwrap();
    let writers = factory.create_column_writers(0).unwrap();
    let mut group = file.next_row_group().unwrap();
    for w in writers {
        w.close().unwrap().append_to_row_group(&mut group).unwrap();
    }
    group.close().unwrap();
    file.close().unwrap();
    vec![none, empty]
}

#[test]
fn zero_row_files_with_dictionary_columns_read_as_empty_tables() {
    let full = small_table();
    let b = full.slice(0, 0);
    let dir = tempfile::tempdir().unwrap();
    for path in zero_row_files(dir.path(), &b) {
        let source = ParquetSource::open(&path).unwrap();
        assert_eq!(source.num_rows(), 0, "{}", path.display());
        // as `predict` and `eval` read: the model's features, its categorical ones, a label
        let opts = ReadOptions {
            label: Some("y".into()),
            features: vec!["x".into(), "s".into(), "code".into(), "t".into()],
            categorical: vec!["s".into(), "code".into(), "t".into()],
            ..Default::default()
        };
        let mut conv = source.converter(&opts).unwrap();
        let mut rows = 0;
        for batch in source.batches(&conv.columns(), None).unwrap() {
            rows += conv.convert(&batch.unwrap()).unwrap().n_rows();
        }
        assert_eq!(rows, 0);
        let empty = RecordBatch::new_empty(Arc::new(source.schema().clone()));
        let t = conv.convert(&empty).unwrap();
        assert_eq!(t.n_rows(), 0);
        assert_eq!(t.features.names(), &["x", "code", "s", "t"]);
        let t = read_parquet(&path, &opts).unwrap();
        assert_eq!(t.n_rows(), 0, "{}", path.display());
        assert!(matches!(t.label, Some(LabelColumn::Numeric(ref v)) if v.is_empty()));
        assert!(t.features.column(2).is_categorical());
    }
}

/// A page header that declares an unknown field holding a list of `count` doubles, more
/// than the rest of the file holds (Thrift compact protocol).
fn header_running_past_the_end(count: u32) -> Vec<u8> {
    let varint = |mut v: u64, out: &mut Vec<u8>| loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    };
    // field 15 (unknown to a page header), a list; its elements are doubles
    let mut header = vec![0xF9, 0xF7];
    varint(u64::from(count), &mut header);
    header
}

#[test]
fn a_page_header_running_past_the_end_is_an_error_at_once() {
    // The decoder skips unknown header fields by reading and takes an empty read as a skip
    // done: two fuzz mutants of this shape read for over a minute (2^31 empty reads) before
    // the reader refused them. 2^22 doubles keep the old behaviour to seconds here.
    let good = parquet_bytes(&small_table(), 20, Compression::UNCOMPRESSED);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("endless_header.parquet");
    std::fs::write(&path, &good).unwrap();
    let source = ParquetSource::open(&path).unwrap();
    let k = source.schema().index_of("k").unwrap();
    let meta = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(&path).unwrap(),
    )
    .unwrap();
    let chunk = parquet::file::reader::FileReader::metadata(&meta)
        .row_group(0)
        .column(k)
        .clone();
    let start = chunk
        .dictionary_page_offset()
        .unwrap_or(chunk.data_page_offset()) as usize;
    let mut bad = good.clone();
    let header = header_running_past_the_end(1 << 22);
    bad[start..start + header.len()].copy_from_slice(&header);
    std::fs::write(&path, &bad).unwrap();
    let Err(e) = read_parquet(&path, &ReadOptions::default()) else {
        panic!("a page header running past the end is an error");
    };
    let e = e.to_string();
    assert!(
        e.contains("endless_header.parquet")
            && e.contains("row group 0, column `k`")
            && e.contains("a page header runs past the end of the file"),
        "{e}"
    );
}

/// A file of 100 nullable float columns (each null in a different share of rows), row
/// groups of 700 rows.
fn wide_table(rows: usize) -> RecordBatch {
    let names: Vec<String> = (0..100).map(|j| format!("c{j}")).collect();
    let columns = names
        .iter()
        .enumerate()
        .map(|(j, n)| {
            let values: Vec<Option<f32>> = (0..rows)
                .map(|r| ((r * 7 + j) % (j + 2) == 0).then_some((r * j) as f32 / 3.0))
                .collect();
            let a: ArrayRef = Arc::new(sapwood_io::arrow_array::Float32Array::from(values));
            (n.as_str(), a)
        })
        .collect();
    batch(columns)
}

#[test]
fn wide_files_decoded_by_several_threads_give_one_threads_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.parquet");
    let good = parquet_bytes(&wide_table(2_000), 700, Compression::SNAPPY);
    std::fs::write(&path, &good).unwrap();
    let read = |threads: usize| -> Vec<RecordBatch> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let source = ParquetSource::open(&path).unwrap();
            source
                .batches(&[], None)
                .unwrap()
                .map(Result::unwrap)
                .collect()
        })
    };
    let one = read(1);
    assert_eq!(one.iter().map(|b| b.num_rows()).sum::<usize>(), 2_000);
    assert_eq!(one[0].num_columns(), 100);
    for threads in [2, 3] {
        assert_eq!(read(threads), one, "{threads} threads");
    }
    // a garbage chunk in a column the second thread decodes is named as with one thread
    let bad = garbled_chunk(&path, &good, 1, 80);
    std::fs::write(&path, &bad).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let e = pool
        .install(|| read_parquet(&path, &ReadOptions::default()))
        .expect_err("a garbage column chunk is an error")
        .to_string();
    assert!(
        e.contains("wide.parquet") && e.contains("row group 1, column `c80`"),
        "{e}"
    );
}
