//! The fuzz targets: every decoder of bytes Sapwood did not write itself must return (an
//! error or a value), never panic. Each test mutates valid inputs for `SAPWOOD_FUZZ_SECONDS`.

use std::path::{Path, PathBuf};

use sapwood_collective::codec;
use sapwood_core::data::{Column, CutSample, FeatureMatrix};
use sapwood_core::grower::sync::{read_candidate, write_candidate};
use sapwood_core::model::Model;
use sapwood_core::params::CommCodec;
use sapwood_core::split::{BinSet, SplitCandidate, SplitRule};
use sapwood_core::wire::ByteReader;
use sapwood_fuzz::{files_in, fuzz, Rng};
use sapwood_io::ReadOptions;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn model_files() {
    let corpus = files_in(&repo().join("tests/golden/models"))
        .into_iter()
        .filter(|f| f.first() == Some(&b'{'))
        .collect::<Vec<_>>();
    assert!(corpus.len() >= 5, "the golden models are the corpus");
    let r = fuzz("model_files", &corpus, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        if let Ok(model) = Model::from_json(text) {
            // what loads must save and load again to the same model
            let again = Model::from_json(&model.to_json()).expect("a re-saved model loads");
            assert_eq!(again.to_json(), model.to_json());
        }
    });
    assert!(r.runs > corpus.len() as u64);
}

/// A histogram-like block: runs of zeros, small and large values of both signs.
fn block(rng: &mut Rng, len: usize) -> Vec<i64> {
    (0..len)
        .map(|i| match (i / 7 + rng.index(3)) % 4 {
            0 => 0,
            1 => rng.index(100) as i64 - 50,
            2 => (rng.next_u64() >> 20) as i64,
            _ => -((rng.next_u64() >> 3) as i64),
        })
        .collect()
}

#[test]
fn histogram_messages() {
    let mut rng = Rng::seeded(3);
    let mut corpus = Vec::new();
    for len in [1usize, 7, 32, 33, 100, 513] {
        let values = block(&mut rng, len);
        let bound = values.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0) * 4;
        for c in [
            CommCodec::None,
            CommCodec::Packed,
            CommCodec::Sparse,
            CommCodec::Auto,
        ] {
            // the block length travels beside the message, as both sides know it
            let mut input = (len as u16).to_le_bytes().to_vec();
            input.extend(codec::encode(&values, bound, c));
            corpus.push(input);
        }
    }
    fuzz("histogram_messages", &corpus, |bytes| {
        if bytes.len() < 2 {
            return;
        }
        let len = u16::from_le_bytes([bytes[0], bytes[1]]) as usize;
        let _ = codec::decode(&bytes[2..], len);
        let mut acc = vec![i64::MAX; len];
        let _ = codec::decode_into(&bytes[2..], &mut acc, true);
    });
}

#[test]
fn split_records() {
    let candidates = [
        None,
        Some(SplitCandidate {
            feature: 4,
            rule: SplitRule::Numeric { bin: 200 },
            default_left: true,
            gain: 3.5,
            left: [-7, 12],
            right: [7, 30],
        }),
        Some(SplitCandidate {
            feature: 1,
            rule: SplitRule::Categorical {
                left: BinSet::from_bins([1u16, 5, 64, 1000]),
            },
            default_left: false,
            gain: 0.25,
            left: [1, 1],
            right: [2, 2],
        }),
    ];
    let mut all = Vec::new();
    let mut corpus = Vec::new();
    for c in &candidates {
        let mut one = Vec::new();
        write_candidate(c.as_ref(), &mut one);
        all.extend_from_slice(&one);
        corpus.push(one);
    }
    corpus.push(all);
    fuzz("split_records", &corpus, |bytes| {
        let mut r = ByteReader::new(bytes, "split record");
        while !r.is_empty() {
            if read_candidate(&mut r).is_err() {
                break;
            }
        }
    });
}

#[test]
fn cut_samples() {
    let n = 300;
    let x: Vec<f32> = (0..n)
        .map(|i| if i % 9 == 0 { f32::NAN } else { i as f32 * 0.5 })
        .collect();
    let codes: Vec<u32> = (0..n).map(|i| (i % 4) as u32).collect();
    let m = FeatureMatrix::new(
        vec!["x".into(), "c".into()],
        vec![
            Column::Numeric(x.into()),
            Column::Categorical {
                codes: codes.into(),
                levels: ["a", "bb", "ccc", "dddd"].map(String::from).to_vec(),
            },
        ],
    )
    .unwrap();
    let sample = CutSample::collect(&m, None, 0, n as u64, 1, 200);
    let corpus = vec![sample.to_bytes()];
    fuzz("cut_samples", &corpus, |bytes| {
        if let Ok(s) = CutSample::from_bytes(bytes) {
            let _ = CutSample::merge(vec![s]);
        }
    });
}

/// Runs a file reader on each mutant written to a scratch file.
fn fuzz_files(name: &str, corpus: &[Vec<u8>], ext: &str, read: impl Fn(&Path)) {
    let dir = std::env::temp_dir().join(format!("sapwood-fuzz-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("input.{ext}"));
    fuzz(name, corpus, |bytes| {
        std::fs::write(&path, bytes).unwrap();
        read(&path);
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parquet_files() {
    let corpus: Vec<Vec<u8>> = files_in(&repo().join("crates/sapwood-io/tests/fixtures"))
        .into_iter()
        .filter(|f| f.starts_with(b"PAR1"))
        .collect();
    assert!(
        corpus.len() >= 5,
        "the reader's Parquet fixtures are the corpus"
    );
    fuzz_files("parquet_files", &corpus, "parquet", |path| {
        let _ = sapwood_io::read_parquet(path, &ReadOptions::default());
    });
}

#[test]
fn csv_files() {
    let corpus: Vec<Vec<u8>> = ["penguins", "diabetes", "chile"]
        .iter()
        .map(|d| std::fs::read(repo().join("datasets").join(d).join("test.csv")).unwrap())
        .collect();
    fuzz_files("csv_files", &corpus, "csv", |path| {
        let _ = sapwood_io::read_csv(path, &ReadOptions::default());
        let _ = sapwood_io::read_csv(
            path,
            &ReadOptions {
                label: Some("species".into()),
                categorical: vec!["island".into()],
                ..Default::default()
            },
        );
    });
}

/// The handshake a TCP rank reads from strangers: a frame (length, bytes), a hello in it,
/// and the coordinator's answer with its address table. Whatever arrives, the decoders
/// return; a hello that decodes encodes back to itself.
#[test]
fn tcp_handshakes() {
    use sapwood_collective::tcp::decode_table;
    use sapwood_collective::tcp::frame::{
        decode_answer, encode_answer, read_frame, write_frame, Hello, ReadFrame, MAX_HANDSHAKE,
    };
    let framed = |payload: &[u8]| {
        let mut v = Vec::new();
        write_frame(&mut v, payload).unwrap();
        v
    };
    let hello = Hello {
        rank: 2,
        world: 3,
        port: 40123,
        token: "a-job-token".into(),
    };
    let table = b"127.0.0.1 7000\n10.0.0.2 40123\n::1 40124\n".to_vec();
    let corpus = vec![
        framed(&hello.encode()),
        framed(&encode_answer(Ok(&table))),
        framed(&encode_answer(Err(
            "a wrong token (it belongs to another job)",
        ))),
        framed(b"GET / HTTP/1.1\r\n\r\n"),
        table.clone(),
    ];
    fuzz("tcp_handshakes", &corpus, |bytes| {
        let _ = decode_table(bytes, 3);
        let Ok(ReadFrame::Frame(f)) = read_frame(&mut &bytes[..], MAX_HANDSHAKE) else {
            return;
        };
        if let Ok(h) = Hello::decode(&f) {
            assert_eq!(Hello::decode(&h.encode()), Ok(h));
        }
        if let Ok(Ok(payload)) = decode_answer(&f) {
            let _ = decode_table(&payload, 3);
        }
    });
}

/// Checkpoint files given to `--resume`: whatever the bytes, loading returns; what loads
/// saves and loads again to the same checkpoint (its integrity digest included).
#[test]
fn checkpoint_files() {
    use sapwood_core::train::Checkpoint;
    let models = files_in(&repo().join("tests/golden/models"))
        .into_iter()
        .filter(|f| f.first() == Some(&b'{'))
        .filter_map(|f| Model::from_json(std::str::from_utf8(&f).ok()?).ok())
        .take(3)
        .collect::<Vec<_>>();
    assert!(!models.is_empty(), "the golden models make the checkpoints");
    let corpus: Vec<Vec<u8>> = models
        .into_iter()
        .map(|m| {
            let rounds = m.num_rounds();
            Checkpoint {
                model: Model {
                    best_iteration: None,
                    ..m
                },
                rounds,
                best: None,
                history: Vec::new(),
                data: Some(0x0123_4567_89ab_cdef),
            }
            .to_json()
            .into_bytes()
        })
        .collect();
    let r = fuzz("checkpoint_files", &corpus, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return;
        };
        if let Ok(c) = Checkpoint::from_json(text) {
            let again = Checkpoint::from_json(&c.to_json()).expect("a re-saved checkpoint loads");
            assert_eq!(again, c);
        }
    });
    assert!(r.runs > corpus.len() as u64);
}
