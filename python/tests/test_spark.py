"""Training on a Spark cluster (``sapwood.spark``): PySpark in ``local-cluster`` mode (a
standalone master and two executor JVMs, each with its own Python workers, so the barrier
stage's tasks and the TCP ranks are separate processes), the model compared **byte for
byte** with single-process training of the scikit-learn estimator on the same rows in the
same order, for 1, 2 and 4 tasks; transform's columns, persistence (alone and in a
Pipeline), a CrossValidator, parameters refused on the driver, and an executor killed
mid-training.

The cluster is ``local-cluster[2,2,1024]``: two executors of two task slots each, since a
barrier stage of four tasks needs four slots at once (``[2,1,1024]`` has two).

Skipped where pyspark or Java is missing, unless ``SAPWOOD_REQUIRE_SPARK=1`` (set by
``scripts/test.sh``), which makes that an error.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd
import pytest

import sapwood
from sapwood import SapwoodClassifier, SapwoodRanker, SapwoodRegressor

from conftest import REPO, marking_rounds

REQUIRED = os.environ.get("SAPWOOD_REQUIRE_SPARK", "") not in ("", "0")

try:
    import pyspark  # noqa: F401
except ImportError:
    if REQUIRED:
        raise
    pytest.skip("pyspark is not installed", allow_module_level=True)
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    if REQUIRED:
        raise RuntimeError("SAPWOOD_REQUIRE_SPARK is set but Java is not installed")
    pytest.skip("Java is not installed (Spark needs it)", allow_module_level=True)

import pyarrow as pa  # noqa: E402
from pyspark.ml import Pipeline, PipelineModel  # noqa: E402
from pyspark.ml.evaluation import RegressionEvaluator  # noqa: E402
from pyspark.ml.feature import VectorAssembler  # noqa: E402
from pyspark.ml.functions import array_to_vector  # noqa: E402
from pyspark.ml.tuning import CrossValidator, ParamGridBuilder  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from sapwood import spark as ss  # noqa: E402

#: Parameters that exercise the hashed samplers (rows, columns, cut sampling).
PARAMS: dict[str, Any] = dict(
    n_estimators=8, max_depth=3, subsample=0.8, colsample_bytree=0.8, bin_sample_rows=200,
    random_state=7,
)
TASKS = (1, 2, 4)

pytestmark = [
    # pyspark's own warnings about pandas 3 (its Arrow conversions work with it)
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One local-cluster session for the module: two executor JVMs with two slots each,
    small memory, Python workers running this interpreter and this checkout's sapwood."""
    package_root = str(Path(sapwood.__file__).resolve().parents[1])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local-cluster[2,2,1024]")
        .appName("sapwood-tests")
        .config("spark.driver.memory", "512m")
        .config("spark.executor.memory", "1024m")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.executorEnv.PYTHONPATH", package_root)
        .config("spark.executorEnv.OMP_NUM_THREADS", "1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # the barrier stages need every slot: wait until both executors have registered
    deadline = time.monotonic() + 120
    status: Any = session.sparkContext._jsc.sc()  # type: ignore[union-attr]
    while status.getExecutorMemoryStatus().size() < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status.getExecutorMemoryStatus().size() >= 3, "the executors did not start"
    yield session
    session.stop()


def bundled(name: str) -> pd.DataFrame:
    return pd.read_parquet(REPO / "datasets" / name / "train.parquet")


def as_strings(frame: pd.DataFrame) -> pd.DataFrame:
    """Category columns as Python strings (None where missing), which Spark takes."""
    out = frame.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype) or out[c].dtype.kind in "OU" or str(
            out[c].dtype
        ) in ("str", "string"):
            out[c] = pd.Series(
                [None if pd.isna(v) else str(v) for v in out[c]], index=out.index, dtype=object
            )
    return out


def frame_of(spark: SparkSession, pdf: pd.DataFrame, partitions: int = 4) -> DataFrame:
    """A DataFrame of ``pdf``'s rows in order: ``partitions`` contiguous slices."""
    df = spark.createDataFrame(pdf)
    assert df.rdd.getNumPartitions() == partitions
    return df


def features_of(df: DataFrame, columns: list[str]) -> pa.Table:
    """The feature columns as the driver sees them, in the DataFrame's order: the
    single-process reference trains on exactly these values."""
    return df.select(*columns).toArrow()


def json_of(model: Any) -> str:
    text: str = model.getBooster().to_json()
    return text


# ---- byte identity ---------------------------------------------------------------------


def test_regression_from_a_vector_column_is_byte_identical(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    train = bundled("diabetes")
    columns = [c for c in train.columns if c != "target"]
    train["w"] = np.random.default_rng(3).uniform(0.5, 2.0, size=len(train))
    df = frame_of(spark, train.astype(np.float64))
    df = df.withColumn("features", array_to_vector(F.array(*columns)))
    X = np.column_stack([train[c].to_numpy(np.float64) for c in columns])
    local = SapwoodRegressor(**PARAMS).fit(X, train["target"], sample_weight=train["w"])
    expected = local.get_booster().to_json()
    for tasks in TASKS:
        model = ss.SapwoodRegressor(num_workers=tasks, weightCol="w", labelCol="target", **PARAMS)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="sapwood.spark"):
            fitted = model.fit(df)
        # moving rows to num_workers partitions is logged; 4 partitions train as they are
        moved = [r for r in caplog.records if "repartitioning 4 partitions" in r.getMessage()]
        assert len(moved) == (0 if tasks == 4 else 1)
        assert isinstance(fitted, ss.SapwoodRegressionModel)
        assert json_of(fitted) == expected, f"{tasks} tasks: the model differs"
        if tasks > 1:
            # the ranks really exchanged histograms over TCP
            assert fitted.getBooster().comm_stats["bytes_sent"] > 0
    # without the weights the model is another one: the weight column is used
    unweighted = ss.SapwoodRegressor(num_workers=2, labelCol="target", **PARAMS).fit(df)
    assert json_of(unweighted) != expected
    # transform: Spark ML's prediction column, the booster's predictions in row order
    out = fitted.transform(df).select("prediction").toPandas()
    np.testing.assert_array_equal(
        out["prediction"].to_numpy(), local.predict(X).astype(np.float64)
    )


def test_binary_classification_from_columns_is_byte_identical(spark: SparkSession) -> None:
    train = as_strings(bundled("chile"))
    columns = [c for c in train.columns if c != "vote"]
    df = frame_of(spark, train)
    X = features_of(df, columns)
    y = train["vote"].to_numpy()
    assert set(np.unique(y)) == {0, 1}
    local = SapwoodClassifier(**PARAMS).fit(X, y)
    expected = local.get_booster().to_json()
    for tasks in TASKS:
        model = ss.SapwoodClassifier(
            num_workers=tasks, features_cols=columns, labelCol="vote",
            pred_contrib_col="shap", **PARAMS,
        ).fit(df)
        assert json_of(model) == expected, f"{tasks} tasks: the model differs"
    # string columns were categorical features, as in single-process training
    assert model.getBooster()._model.input_types == [
        "strings" if train[c].dtype == object else "number" for c in columns
    ]
    out = model.transform(df).toPandas()
    proba = np.stack([v.toArray() for v in out["probability"]])
    np.testing.assert_array_equal(proba, local.predict_proba(X))
    margin = local.predict(X, output_margin=True).astype(np.float64)
    raw = np.stack([v.toArray() for v in out["rawPrediction"]])
    np.testing.assert_array_equal(raw, np.column_stack([-margin, margin]))
    np.testing.assert_array_equal(out["prediction"].to_numpy(), local.predict(X).astype(float))
    shap = np.stack([v.toArray() for v in out["shap"]])
    np.testing.assert_array_equal(
        shap, local.get_booster().predict(X, pred_contribs=True).astype(np.float64)
    )


def test_multiclass_is_byte_identical(spark: SparkSession) -> None:
    train = as_strings(bundled("penguins"))
    species = sorted(train["species"].unique())
    train["label"] = train["species"].map({s: float(i) for i, s in enumerate(species)})
    train = train.drop(columns="species")
    columns = [c for c in train.columns if c != "label"]
    df = frame_of(spark, train)
    X = features_of(df, columns)
    local = SapwoodClassifier(**PARAMS).fit(X, train["label"].to_numpy())
    expected = local.get_booster().to_json()
    for tasks in TASKS:
        model = ss.SapwoodClassifier(
            num_workers=tasks, features_cols=columns, pred_leaf_col="leaves", **PARAMS
        ).fit(df)
        assert json_of(model) == expected, f"{tasks} tasks: the model differs"
    assert model.numClasses == len(species) == 3
    out = model.transform(df).toPandas()
    proba = np.stack([v.toArray() for v in out["probability"]])
    np.testing.assert_array_equal(proba, local.predict_proba(X))
    np.testing.assert_array_equal(out["prediction"].to_numpy(), local.predict(X))
    leaves = np.stack([v.toArray() for v in out["leaves"]])
    np.testing.assert_array_equal(leaves, local.apply(X).astype(np.float64))
    # an empty partition trains nothing: the ranks are the three other partitions
    rows = df.rdd.mapPartitionsWithIndex(lambda i, it: iter(()) if i == 1 else it)
    holey = spark.createDataFrame(rows, df.schema).cache()
    sizes = holey.rdd.glom().map(len).collect()
    assert len(sizes) == 4 and sizes[1] == 0 and min(sizes[0], sizes[2], sizes[3]) > 0
    rest = holey.select("label").toPandas()["label"].to_numpy()
    local = SapwoodClassifier(**PARAMS).fit(features_of(holey, columns), rest)
    model = ss.SapwoodClassifier(num_workers=4, features_cols=columns, **PARAMS).fit(holey)
    assert json_of(model) == local.get_booster().to_json()
    holey.unpersist()


def test_ranking_arranges_queries_and_is_byte_identical(spark: SparkSession) -> None:
    train = bundled("lambdarank")
    columns = [c for c in train.columns if c.startswith("f")][:40]
    train = train[["qid", "relevance", *columns]]
    # queries scattered over the DataFrame: fit range-partitions them by qid
    shuffled = train.sample(frac=1.0, random_state=5).reset_index(drop=True)
    df = frame_of(spark, shuffled)
    # the reference: the rows stably sorted by query id
    ordered = shuffled.sort_values("qid", kind="stable").reset_index(drop=True)
    X = pa.Table.from_pandas(ordered[columns], preserve_index=False)
    local = SapwoodRanker(**PARAMS).fit(X, ordered["relevance"], qid=ordered["qid"])
    expected = local.get_booster().to_json()
    for tasks in TASKS:
        model = ss.SapwoodRanker(
            num_workers=tasks, features_cols=columns, labelCol="relevance", qidCol="qid",
            **PARAMS,
        ).fit(df)
        assert json_of(model) == expected, f"{tasks} tasks: the model differs"
    scores = model.transform(df).select("prediction").toPandas()["prediction"].to_numpy()
    Xs = pa.Table.from_pandas(shuffled[columns], preserve_index=False)
    np.testing.assert_array_equal(scores, local.predict(Xs).astype(np.float64))


def test_early_stopping_on_the_validation_rows(spark: SparkSession) -> None:
    train = bundled("breast_cancer")
    columns = [c for c in train.columns if c != "target"]
    train["is_valid"] = np.arange(len(train)) % 4 == 0
    df = frame_of(spark, train)
    fit_rows, valid_rows = train[~train["is_valid"]], train[train["is_valid"]]
    kw = {**PARAMS, "n_estimators": 200, "learning_rate": 0.5, "eval_metric": "logloss"}
    local = SapwoodClassifier(**kw, early_stopping_rounds=3).fit(
        fit_rows[columns], fit_rows["target"],
        eval_set=[(valid_rows[columns], valid_rows["target"])],
    )
    model = ss.SapwoodClassifier(
        num_workers=2, features_cols=columns, labelCol="target",
        validationIndicatorCol="is_valid", early_stopping_rounds=3, **kw,
    ).fit(df)
    booster = model.getBooster()
    assert booster.to_json() == local.get_booster().to_json()
    assert booster.num_boosted_rounds() < 200, "early stopping did not stop training"
    assert booster.best_iteration == local.best_iteration
    assert booster.evals_result()["validation_0"]["logloss"] == local.evals_result()[
        "validation_0"
    ]["logloss"]
    with pytest.raises(sapwood.ParameterError, match="validationIndicatorCol"):
        ss.SapwoodClassifier(
            features_cols=columns, labelCol="target", early_stopping_rounds=3
        ).fit(df)


# ---- persistence, pipelines, tuning ----------------------------------------------------


def test_pipeline_model_saves_and_loads(spark: SparkSession, tmp_path: Path) -> None:
    train = bundled("breast_cancer")
    columns = [c for c in train.columns if c != "target"][:10]
    df = frame_of(spark, train)
    pipeline = Pipeline(
        stages=[
            VectorAssembler(inputCols=columns, outputCol="features"),
            ss.SapwoodClassifier(num_workers=2, labelCol="target", max_depth=2, n_estimators=5),
        ]
    )
    fitted = pipeline.fit(df)
    path = str(tmp_path / "pipeline")
    fitted.write().save(path)
    loaded = PipelineModel.load(path)
    model, again = fitted.stages[-1], loaded.stages[-1]
    assert isinstance(again, ss.SapwoodClassificationModel)
    assert again.uid == model.uid
    assert again.getOrDefault("max_depth") == 2 and again.getOrDefault("n_estimators") == 5
    assert json_of(again) == json_of(model)
    # the model file is a plain Sapwood model file
    files = list((tmp_path / "pipeline" / "stages").glob("*/model/sapwood.json"))
    assert len(files) == 1
    assert sapwood.Booster(model_file=files[0]).to_json() == json_of(model)
    before = fitted.transform(df).select("probability", "prediction").toPandas()
    after = loaded.transform(df).select("probability", "prediction").toPandas()
    np.testing.assert_array_equal(
        np.stack([v.toArray() for v in before["probability"]]),
        np.stack([v.toArray() for v in after["probability"]]),
    )
    # the estimator's Params round-trip too, engine aliases included
    estimator = ss.SapwoodRegressor(eta=0.25, num_leaves=7, cat_smooth=3.0, num_workers=2)
    estimator.write().save(str(tmp_path / "estimator"))
    back = ss.SapwoodRegressor.load(str(tmp_path / "estimator"))
    for name, value in (("learning_rate", 0.25), ("max_leaves", 7), ("cat_smooth", 3.0),
                        ("num_workers", 2)):
        assert back.getOrDefault(name) == value


def test_cross_validator_picks_the_better_depth(spark: SparkSession) -> None:
    train = bundled("diabetes").astype(np.float64)
    columns = [c for c in train.columns if c != "target"]
    df = frame_of(spark, train).withColumn("features", array_to_vector(F.array(*columns)))
    estimator = ss.SapwoodRegressor(num_workers=2, labelCol="target", n_estimators=20,
                                    learning_rate=0.3, random_state=1)
    grid = ParamGridBuilder().addGrid(estimator.max_depth, [1, 4]).build()
    evaluator = RegressionEvaluator(labelCol="target", metricName="rmse")
    cv = CrossValidator(estimator=estimator, estimatorParamMaps=grid, evaluator=evaluator,
                        numFolds=2, seed=3)
    result = cv.fit(df)
    # the two depths give two models: were max_depth ignored, the metrics would be equal
    assert result.avgMetrics[0] != result.avgMetrics[1]
    best = int(np.argmin(result.avgMetrics))
    depth = [1, 4][best]
    assert result.bestModel.getOrDefault("max_depth") == depth
    # the final model is single-process training of all the rows at that depth
    X = np.column_stack([train[c].to_numpy() for c in columns])
    local = SapwoodRegressor(n_estimators=20, learning_rate=0.3, random_state=1,
                             max_depth=depth).fit(X, train["target"])
    assert json_of(result.bestModel) == local.get_booster().to_json()


# ---- failures --------------------------------------------------------------------------


def test_bad_parameters_are_refused_on_the_driver(spark: SparkSession) -> None:
    with pytest.raises(sapwood.ParameterError, match="did you mean `max_depth`"):
        ss.SapwoodRegressor(max_dept=3)
    train = bundled("diabetes").astype(np.float64)
    df = frame_of(spark, train)
    sc = spark.sparkContext
    sc.setJobGroup("sapwood-bad-params", "refused before any task")
    try:
        cases = [
            (ss.SapwoodClassifier(features_cols=["age"], labelCol="sex", learning_rate=-1.0),
             "learning_rate"),
            (ss.SapwoodRegressor(features_cols=["age"], labelCol="target", num_workers=0),
             "num_workers"),
            (ss.SapwoodRegressor(features_cols=["age"], labelCol="target", workers=2), "workers"),
            (ss.SapwoodRegressor(features_cols=["age"], labelCol="target", comm_timeout=-1.0),
             "comm_timeout"),
            (ss.SapwoodRegressor(features_cols=["age"], labelCol="target",
                                 objective="binary:logistic"), "objective"),
        ]
        for estimator, name in cases:
            with pytest.raises(sapwood.ParameterError, match=f"`{name}`"):
                estimator.fit(df)
        with pytest.raises(sapwood.DataError, match="features_cols"):
            ss.SapwoodRegressor(features_cols=["nope"], labelCol="target").fit(df)
        assert list(sc.statusTracker().getJobIdsForGroup("sapwood-bad-params")) == []
    finally:
        sc.setJobGroup(None, None)  # type: ignore[arg-type]


def executor_pids() -> dict[int, set[int]]:
    """Each executor JVM started by this test process (local-cluster: children of the
    driver JVM), with its descendant processes (the Python workers)."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="ignore")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def descends(pid: int, ancestor: int) -> bool:
        while pid > 1:
            if pid == ancestor:
                return True
            pid = parents.get(pid, 0)
        return False

    me = os.getpid()
    executors = [
        p for p, cmd in commands.items()
        if "CoarseGrainedExecutorBackend" in cmd and descends(p, me)
    ]
    return {e: {p for p in parents if descends(p, e)} for e in executors}


def test_a_killed_executor_makes_fit_raise_naming_the_rank(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Runs last: it kills one of the two executors (the cluster starts another). Rank 0's
    callback says which process it is once training is under way and slows the rounds;
    the executor not running rank 0 is then killed. Bounded: the callback stops training
    after ``give_up`` seconds, so a loss never noticed fails the test."""
    timeout, give_up = 10.0, 90.0
    marker = tmp_path / "rank0.pid"
    train = bundled("breast_cancer")
    columns = [c for c in train.columns if c != "target"]
    df = frame_of(spark, train)
    slow_rounds = marking_rounds(marker, give_up)

    lost: dict[str, Any] = {}

    def kill_an_executor() -> None:
        try:
            deadline = time.monotonic() + give_up
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            rank0 = int(marker.read_text())
            executors = executor_pids()
            assert len(executors) == 2, f"expected two executors, found {executors}"
            (other,) = [e for e, children in executors.items() if rank0 not in children]
            lost["at"] = time.monotonic()
            os.kill(other, signal.SIGKILL)
        except Exception as e:  # reported by the test below
            lost["error"] = e

    thread = threading.Thread(target=kill_an_executor, daemon=True)
    thread.start()
    estimator = ss.SapwoodClassifier(
        num_workers=4, features_cols=columns, labelCol="target", n_estimators=100_000,
        max_depth=2, comm_timeout=timeout, callbacks=[slow_rounds],
    )
    try:
        with pytest.raises(sapwood.BackendError) as raised:
            estimator.fit(df)
    finally:
        thread.join(5)
    assert "error" not in lost, f"no executor was killed: {lost.get('error')!r}"
    failed_after = time.monotonic() - lost["at"]
    assert failed_after < timeout + 10, str(raised.value)
    assert re.search(r"rank [0-3]\b", str(raised.value)), str(raised.value)
