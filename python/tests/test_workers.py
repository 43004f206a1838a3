"""Data-parallel training from Python: `workers=` reaches the engine, models do not change,
and the booster reports the bytes exchanged."""
import pickle

import numpy as np

import sapwood


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = ((x[:, 0] * x[:, 1] + np.sin(x[:, 2])) > 0).astype(np.float32)
    return x, y


def test_workers_give_the_same_model_and_count_their_bytes(tmp_path):
    x, y = _data()
    params = {"objective": "binary:logistic", "max_depth": 5, "grad_bits": 8}
    one = sapwood.train(params, sapwood.Dataset(x, label=y), num_boost_round=10, verbose_eval=False)
    four = sapwood.train({**params, "workers": 4}, sapwood.Dataset(x, label=y), num_boost_round=10, verbose_eval=False)
    assert one.to_json() == four.to_json()
    assert one.comm_stats["bytes_sent"] == 0
    stats = four.comm_stats
    assert stats["bytes_sent"] > 0
    assert stats["bytes_before_compression"] > stats["bytes_sent"]
    assert len(stats["per_round"]) == 10
    assert sum(r["bytes_sent"] for r in stats["per_round"]) <= stats["bytes_sent"]
    # time inside the exchange is counted; the CPU backend encodes on the host
    assert stats["seconds"] > 0 and stats["device_encoded_blocks"] == 0
    # the exchange in one piece per level instead of chunks behind the builds: same model
    serial = sapwood.train({**params, "workers": 4, "comm_overlap": False}, sapwood.Dataset(x, label=y),
                           num_boost_round=10, verbose_eval=False)
    assert serial.to_json() == one.to_json()
    # a pickled booster (as one trained on a Dask worker reaches the client) still says it;
    # a model loaded into it afterwards says nothing of training
    again = pickle.loads(pickle.dumps(four))
    assert again.comm_stats == stats
    four.save_model(tmp_path / "four.json")
    again.load_model(tmp_path / "four.json")
    assert again.comm_stats["bytes_sent"] == 0


def test_estimator_workers_parameter():
    x, y = _data(seed=1)
    a = sapwood.SapwoodClassifier(n_estimators=8, workers=3).fit(x, y)
    b = sapwood.SapwoodClassifier(n_estimators=8).fit(x, y)
    np.testing.assert_array_equal(a.predict_proba(x), b.predict_proba(x))
    # equal models either way: the run record shows three workers trained
    assert a.get_booster().run_record["workers"] == 3
    assert b.get_booster().run_record["workers"] == 1
