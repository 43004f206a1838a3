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
