"""Training on a ``sapwood.DataIter``: rows read in batches (pyarrow record batches, pandas
frames) save the model the same rows in one ``Dataset`` save, byte for byte; the iterator is
read a known number of times; what needs the rows in memory is refused by name; an
exception raised while reading comes back as itself."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import sapwood

N = 2_000


def _rows(n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    x[rng.random((n, 4)) < 0.05] = np.nan
    signal = np.nan_to_num(x[:, 0]) - 0.5 * np.nan_to_num(x[:, 1]) + 0.3 * rng.normal(size=n)
    return {
        "x": x,
        "y": (signal > 0).astype(np.float32),
        "grade": np.minimum(3, np.maximum(0, np.round(signal + 1.5))).astype(np.float32),
        "w": (1.0 + rng.integers(0, 3, size=n)).astype(np.float32),
        "margin": (0.1 * rng.normal(size=n)).astype(np.float32),
        # queries of 25 rows; batches of 300 cut through some of them
        "qid": np.arange(n) // 25,
    }


def _table(x: np.ndarray) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(c) for c in x.T], names=[f"f{j}" for j in range(x.shape[1])])


class Batches(sapwood.DataIter):
    """Rows of ``data`` in batches of ``size``, as pyarrow record batches; counts passes."""

    def __init__(
        self,
        data: dict[str, Any],
        label: str = "y",
        size: int = 300,
        extra: tuple[str, ...] = (),
        fail_at: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.data, self.label, self.size, self.extra = data, label, size, extra
        self.fail_at = fail_at
        self.at = 0
        self.resets = 0

    def reset(self) -> None:
        self.at = 0
        self.resets += 1

    def next(self, input_data: Callable[..., None]) -> bool:
        n = len(self.data["y"])
        if self.at >= n:
            return False
        if self.fail_at is not None and self.at >= self.fail_at:
            raise KeyError("the reader broke")
        rows = slice(self.at, self.at + self.size)
        given = {
            "weight": self.data["w"][rows] if "w" in self.extra else None,
            "base_margin": self.data["margin"][rows] if "margin" in self.extra else None,
            "qid": self.data["qid"][rows] if "qid" in self.extra else None,
        }
        input_data(_table(self.data["x"][rows]), label=self.data[self.label][rows], **given)
        self.at += self.size
        return True


def _whole(data: dict[str, Any], label: str = "y", extra: tuple[str, ...] = ()) -> sapwood.Dataset:
    return sapwood.Dataset(
        _table(data["x"]),
        label=data[label],
        weight=data["w"] if "w" in extra else None,
        base_margin=data["margin"] if "margin" in extra else None,
        qid=data["qid"] if "qid" in extra else None,
    )


PARAMS: dict[str, Any] = {"objective": "binary:logistic", "max_depth": 4, "bin_sample_rows": 700}


@pytest.mark.parametrize(
    ("params", "label", "extra"),
    [
        (PARAMS, "y", ()),
        (PARAMS, "y", ("w", "margin")),
        ({**PARAMS, "objective": "rank:ndcg", "eval_metric": "ndcg@10"}, "grade", ("qid",)),
    ],
)
def test_a_data_iter_saves_the_model_of_the_same_rows_in_one_dataset(
    params: dict[str, Any], label: str, extra: tuple[str, ...]
) -> None:
    train, valid = _rows(N, 1), _rows(600, 2)
    valid_extra = tuple(e for e in extra if e != "margin")
    expected = sapwood.train(
        params, _whole(train, label, extra), 8,
        evals=[(_whole(valid, label, valid_extra), "valid")], verbose_eval=False,
    )
    it, valid_it = Batches(train, label, extra=extra), Batches(valid, label, extra=valid_extra)
    got = sapwood.train(params, it, 8, evals=[(valid_it, "valid")], verbose_eval=False)
    assert got.to_json() == expected.to_json()
    assert got.evals_result() == expected.evals_result()
    # counted, sampled for the cuts, binned; an evaluation set counted and binned
    assert (it.resets, valid_it.resets) == (3, 2)
    # an in-memory evaluation set beside a DataIter
    mixed = sapwood.train(
        params, Batches(train, label, extra=extra), 8,
        evals=[(_whole(valid, label, valid_extra), "valid")], verbose_eval=False,
    )
    assert mixed.to_json() == expected.to_json()


def test_pandas_batches_with_a_categorical_column_save_the_dataset_model() -> None:
    data = _rows(N, 3)
    levels = ["red", "green", "blue", "grey"]
    colour = pd.Categorical(np.array(levels)[np.arange(N) % 4], categories=levels)
    frame = pd.DataFrame({"a": data["x"][:, 0], "b": data["x"][:, 1], "colour": colour})

    class Frames(sapwood.DataIter):
        def reset(self) -> None:
            self.at = 0

        def next(self, input_data: Callable[..., None]) -> bool:
            if self.at >= N:
                return False
            rows = slice(self.at, self.at + 512)
            input_data(frame.iloc[rows], label=data["y"][rows])
            self.at += 512
            return True

    expected = sapwood.train(PARAMS, sapwood.Dataset(frame, label=data["y"]), 6)
    got = sapwood.train(PARAMS, Frames(), 6)
    assert got.to_json() == expected.to_json()
    np.testing.assert_array_equal(got.predict(frame), expected.predict(frame))


def test_continuing_a_model_on_a_data_iter_saves_the_one_run_model() -> None:
    data = _rows(N, 4)
    first = sapwood.train(PARAMS, Batches(data), 5)
    it = Batches(data)
    continued = sapwood.train(PARAMS, it, 5, xgb_model=first)
    whole = sapwood.train(PARAMS, _whole(data), 10)
    assert continued.to_json() == whole.to_json()
    # the model's cuts bin the rows: no sampling pass
    assert it.resets == 2


def test_what_needs_the_rows_in_memory_is_refused_naming_it() -> None:
    data = _rows(300, 5)

    def obj(preds: np.ndarray, d: sapwood.Dataset) -> tuple[np.ndarray, np.ndarray]:
        return preds, np.ones_like(preds)

    with pytest.raises(sapwood.ParameterError, match="`obj`"):
        sapwood.train(PARAMS, Batches(data), 2, obj=obj)
    with pytest.raises(sapwood.ParameterError, match="`scale_pos_weight`"):
        sapwood.train({**PARAMS, "scale_pos_weight": 3}, Batches(data), 2)
    with pytest.raises(sapwood.DataError, match="training data is in memory"):
        sapwood.train(PARAMS, _whole(data), 2, evals=[(Batches(data), "v")])


def test_an_exception_raised_while_reading_comes_back_as_itself() -> None:
    data = _rows(N, 6)
    # the counting pass reads every batch: the failure comes at the first pass
    with pytest.raises(KeyError, match="the reader broke"):
        sapwood.train(PARAMS, Batches(data, fail_at=900), 2)

    class Flaky(Batches):
        """Breaks on its third pass, inside the engine's binning pass."""

        def next(self, input_data: Callable[..., None]) -> bool:
            if self.resets == 3 and self.at >= 600:
                raise KeyError("the reader broke while binning")
            return super().next(input_data)

    with pytest.raises(KeyError, match="while binning"):
        sapwood.train(PARAMS, Flaky(data), 2)

    class Twice(Batches):
        def next(self, input_data: Callable[..., None]) -> bool:
            if self.at < len(self.data["y"]):
                input_data(_table(self.data["x"][:10]), label=self.data["y"][:10])
            return super().next(input_data)

    with pytest.raises(sapwood.DataError, match="once per batch"):
        sapwood.train(PARAMS, Twice(data), 2)


def test_the_readmes_parquet_batches_train_the_model_of_the_whole_table(tmp_path: Any) -> None:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    data = _rows(N, 7)
    table = pa.Table.from_batches([_table(data["x"])]).append_column("y", pa.array(data["y"]))
    for part in range(3):
        rows = slice(part * 700, (part + 1) * 700)
        pq.write_table(table.slice(rows.start, 700), tmp_path / f"part-{part}.parquet", row_group_size=256)

    class ParquetBatches(sapwood.DataIter):
        def __init__(self, path: Any) -> None:
            super().__init__()
            self.dataset = ds.dataset(path)

        def reset(self) -> None:
            self.batches = self.dataset.to_batches()

        def next(self, input_data: Callable[..., None]) -> bool:
            batch = next(self.batches, None)
            if batch is None:
                return False
            input_data(batch.drop_columns(["y"]), label=batch.column("y"))
            return True

    got = sapwood.train({"objective": "binary:logistic"}, ParquetBatches(tmp_path), 10)
    whole = ds.dataset(tmp_path).to_table()
    expected = sapwood.train(
        {"objective": "binary:logistic"},
        sapwood.Dataset(whole.drop_columns(["y"]), label=whole.column("y")),
        10,
    )
    assert got.to_json() == expected.to_json()


def test_rows_that_change_between_passes_or_carry_no_label_are_refused() -> None:
    data = _rows(N, 8)

    class Shrinking(Batches):
        """Loses its last batch after the counting pass."""

        def next(self, input_data: Callable[..., None]) -> bool:
            if self.resets > 1 and self.at >= N - self.size:
                return False
            return super().next(input_data)

    with pytest.raises(sapwood.SchemaMismatchError, match="sampling pass read"):
        sapwood.train(PARAMS, Shrinking(data), 2)

    class Unlabelled(Batches):
        def next(self, input_data: Callable[..., None]) -> bool:
            if self.at >= N:
                return False
            input_data(_table(self.data["x"][self.at : self.at + self.size]))
            self.at += self.size
            return True

    with pytest.raises(sapwood.DataError, match="no label"):
        sapwood.train(PARAMS, Unlabelled(data), 2)


def test_evals_may_be_none_or_a_generator_as_in_xgboost() -> None:
    data, valid = _rows(600, 9), _rows(300, 10)
    expected = sapwood.train(PARAMS, _whole(data), 3, evals=[(_whole(valid), "v")])
    assert sapwood.train(PARAMS, _whole(data), 3, evals=None).to_json() == expected.to_json()
    pairs = ((it, name) for it, name in [(Batches(valid), "v")])
    got = sapwood.train(PARAMS, Batches(data), 3, evals=pairs)
    assert got.to_json() == expected.to_json()
    assert got.evals_result() == expected.evals_result()
