"""Bad inputs raise the documented exceptions, with the engine's messages."""

from __future__ import annotations

import os

from pathlib import Path

import numpy as np
import pytest

import sapwood


def test_hierarchy() -> None:
    for cls in (sapwood.ParameterError, sapwood.DataError, sapwood.ModelError):
        assert issubclass(cls, sapwood.SapwoodError) and issubclass(cls, ValueError)
    for cls in (sapwood.LabelError, sapwood.SchemaMismatchError):
        assert issubclass(cls, sapwood.DataError)
    assert issubclass(sapwood.SapwoodFileNotFoundError, FileNotFoundError)
    assert issubclass(sapwood.SapwoodIOError, OSError)
    assert issubclass(sapwood.BackendError, RuntimeError)
    assert sapwood.ParameterError.__module__ == "sapwood"


def test_unknown_parameter_suggests_a_name() -> None:
    d = sapwood.Dataset(np.zeros((4, 1)), label=np.arange(4.0))
    with pytest.raises(sapwood.ParameterError) as e:
        sapwood.train({"max_dept": 3}, d)
    assert str(e.value) == "unknown parameter `max_dept`; did you mean `max_depth`?"
    # errors name the parameter as it was given, alias or not
    with pytest.raises(sapwood.ParameterError, match="invalid parameter `eta`: -1"):
        sapwood.train({"eta": -1}, d)
    with pytest.raises(sapwood.ParameterError, match="invalid parameter `learning_rate`: -1"):
        sapwood.train({"learning_rate": -1}, d)
    with pytest.raises(sapwood.ParameterError, match="max_depth.*`deep`"):
        sapwood.train({"max_depth": "deep"}, d)
    with pytest.raises(sapwood.ParameterError, match="unknown objective"):
        sapwood.train({"objective": "reg:nonsense"}, d)
    with pytest.raises(sapwood.ParameterError, match="early stopping needs"):
        sapwood.train({}, d, early_stopping_rounds=3)
    # query groups are accepted (ranking); sizes that do not add up to the rows name `group`
    assert list(sapwood.Dataset(np.zeros((4, 1)), group=[2, 2]).get_group()) == [2, 2]
    with pytest.raises(sapwood.DataError, match="`group`: the 2 query sizes add up to 5"):
        sapwood.Dataset(np.zeros((4, 1)), group=[2, 3])


def test_nan_and_bad_labels() -> None:
    X = np.zeros((5, 2))
    with pytest.raises(sapwood.LabelError, match="label at row 2 is NaN"):
        sapwood.train({}, sapwood.Dataset(X, label=[0, 1, np.nan, 1, 0]))
    with pytest.raises(sapwood.LabelError, match=r"binary:logistic needs labels in \[0, 1\]"):
        sapwood.train({"objective": "binary:logistic"}, sapwood.Dataset(X, label=[0, 1, 2, 1, 0]))
    with pytest.raises(sapwood.LabelError, match="row 1 is missing"):
        sapwood.Dataset(X, label=["a", None, "b", "a", "b"])
    with pytest.raises(sapwood.DataError, match="has no label"):
        sapwood.train({}, sapwood.Dataset(X))


def test_wrong_shapes() -> None:
    with pytest.raises(sapwood.DataError, match="`label` has 3 rows but the dataset has 5"):
        sapwood.Dataset(np.zeros((5, 2)), label=[1, 2, 3])
    with pytest.raises(sapwood.DataError, match="`weight` has 2 rows"):
        sapwood.Dataset(np.zeros((5, 2)), weight=[1, 2])
    with pytest.raises(sapwood.DataError, match="2-D"):
        sapwood.Dataset(np.zeros(5))
    with pytest.raises(sapwood.DataError, match="3 feature names for 2 columns"):
        sapwood.Dataset(np.zeros((5, 2)), feature_names=["a", "b", "c"])
    with pytest.raises(sapwood.DataError, match="weights must be finite"):
        sapwood.train({}, sapwood.Dataset(np.zeros((3, 1)), label=[1, 2, 3], weight=[1, -1, 1]))
    with pytest.raises(sapwood.DataError, match="complex"):
        sapwood.Dataset(np.zeros((3, 2), dtype=complex))


def test_files(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(FileNotFoundError) as e:
        sapwood.Booster(model_file=missing)
    assert isinstance(e.value, sapwood.SapwoodError)
    assert str(e.value).startswith(f"{missing}: ") and e.value.errno == 2
    assert e.value.filename == str(missing)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(sapwood.ModelError, match="invalid model"):
        sapwood.Booster(model_file=bad)
    with pytest.raises(sapwood.ModelError):
        sapwood.Booster.from_json("not json")
    with pytest.raises(sapwood.ModelError, match="no model"):
        sapwood.Booster().predict(np.zeros((1, 1)))
    b = sapwood.train({}, sapwood.Dataset(np.zeros((3, 1)), label=[1.0, 2.0, 3.0]), 2)
    with pytest.raises(FileNotFoundError):
        b.save_model(tmp_path / "no-such-dir" / "m.json")
    with pytest.raises(sapwood.SapwoodIOError) as io:
        b.save_model(tmp_path)  # a directory
    assert not isinstance(io.value, FileNotFoundError) and isinstance(io.value, OSError)


def test_device_and_workers_reach_the_engine() -> None:
    d = sapwood.Dataset(np.zeros((4, 1)), label=np.arange(4.0))
    cpu = sapwood.train({}, d, 2)
    # several workers train the same model
    assert sapwood.train({"workers": 2}, d, 2).to_json() == cpu.to_json()
    # more workers than rows is refused by name
    with pytest.raises(sapwood.ParameterError, match="`workers`"):
        sapwood.train({"workers": 5}, d, 2)
    # a GPU device either trains the CPU's model or says clearly why it cannot (no driver
    # or no adapter on this machine): never a panic
    for device in ("cuda", "wgpu"):
        try:
            model = sapwood.train({"device": device}, d, 2)
        except sapwood.BackendError as e:
            assert device in str(e)
            # CI installs lavapipe and says so: there the WGSL backend must train
            required = os.environ.get("SAPWOOD_REQUIRE_ADAPTER") == "1"
            assert not (device == "wgpu" and required), f"no adapter although required: {e}"
        else:
            assert model.to_json() == cpu.to_json()
    with pytest.raises(sapwood.ParameterError, match="`device`: `tpu` is not cpu, wgpu or cuda"):
        sapwood.train({"device": "tpu"}, d, 2)
    with pytest.raises(sapwood.ParameterError, match="`workers`: must be at least 1"):
        sapwood.train({"workers": 0}, d, 2)
