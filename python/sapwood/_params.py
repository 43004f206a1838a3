"""Parameters as XGBoost and LightGBM users write them, made into the engine's.

One place decides, for :func:`sapwood.train` and the scikit-learn estimators alike:

* names are the engine's (with its XGBoost/LightGBM aliases) or one of the peers' names
  handled here; anything else is refused with the engine's "did you mean" message;
* peer settings that change nothing in Sapwood (``tree_method="hist"``,
  ``boosting_type="gbdt"``, ``verbosity``, ...) are accepted with a one-time warning, and
  values that would change the model (``tree_method="exact"``, ``boosting_type="dart"``)
  are refused, saying what Sapwood does instead;
* ``max_depth=-1`` (LightGBM: no limit) is the engine's 0;
* ``scale_pos_weight`` is taken out: it reweights the positive rows of the training data;
* parameters may be a dict or a list of ``(name, value)`` pairs, where repeated
  ``eval_metric`` entries add up (XGBoost's habit);
* errors name the parameter as the user wrote it (``n_estimators``, not ``num_rounds``).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from . import _sapwood
from ._sapwood import ParameterError

#: Parameter values: numbers, names, lists (``eval_metric``), or maps and nested lists of
#: features (``monotone_constraints``, ``interaction_constraints``).
ParamValue = Union[str, int, float, bool, None, Sequence[Any], Mapping[str, Any]]

#: A parameter set: a mapping, or ``(name, value)`` pairs (names may repeat).
Params = Union[Mapping[str, Any], Sequence[tuple[str, Any]]]

_ALIASES: Optional[dict[str, str]] = None


def canonical_param(name: str) -> Optional[str]:
    """The engine's name of a parameter given by name or alias, or None if unknown."""
    global _ALIASES
    if _ALIASES is None:
        _ALIASES = {}
        for canonical, aliases in _sapwood.parameter_names():
            _ALIASES[canonical] = canonical
            for a in aliases:
                _ALIASES[a] = canonical
    return _ALIASES.get(_clean(name))


def _clean(name: str) -> str:
    return str(name).strip().replace("-", "_")


#: Settings that only tune logging; Sapwood's library never logs, so they do nothing.
_LOGGING = frozenset({"verbosity", "verbose", "silent"})

#: Peer settings, by name, with the values that are what Sapwood always does (accepted with
#: a warning) and, for other values, what Sapwood does instead (the refusal's text).
_PEER_SETTINGS: dict[str, tuple[frozenset[str], str]] = {
    "tree_method": (
        frozenset({"hist", "auto"}),
        "Sapwood always grows trees from histograms of binned features, as "
        "tree_method=\"hist\" does; set max_bin for finer bins, or device=\"cuda\" for a GPU",
    ),
    "booster": (
        frozenset({"gbtree"}),
        "Sapwood boosts decision trees (booster=\"gbtree\"); linear boosters and DART "
        "dropout are not available",
    ),
    "boosting_type": (
        frozenset({"gbdt"}),
        "Sapwood does gradient boosting of decision trees (boosting_type=\"gbdt\"); DART, "
        "GOSS and random forests are not available (subsample samples rows uniformly)",
    ),
    "boosting": (
        frozenset({"gbdt"}),
        "Sapwood does gradient boosting of decision trees (boosting=\"gbdt\"); DART, "
        "GOSS and random forests are not available (subsample samples rows uniformly)",
    ),
    "enable_categorical": (
        frozenset({"true", "false"}),
        "",
    ),
    "deterministic": (
        frozenset({"true"}),
        "Sapwood's models are always bit-for-bit reproducible (deterministic=True)",
    ),
    "force_col_wise": (frozenset({"true", "false"}), ""),
    "force_row_wise": (frozenset({"true", "false"}), ""),
    "validate_parameters": (
        frozenset({"true", "1"}),
        "Sapwood always validates parameter names and values",
    ),
}

#: Why each accepted peer setting changes nothing, for its warning.
_NO_EFFECT: dict[str, str] = {
    "tree_method": "Sapwood always builds histograms (tree_method=\"hist\")",
    "booster": "Sapwood always boosts trees (booster=\"gbtree\")",
    "boosting_type": "Sapwood always does gradient boosting of trees (boosting_type=\"gbdt\")",
    "boosting": "Sapwood always does gradient boosting of trees (boosting=\"gbdt\")",
    "enable_categorical": "Sapwood finds categorical features from the data's dtypes "
    "(pandas category and string columns, Arrow dictionaries) or categorical_features",
    "deterministic": "Sapwood's models are always reproducible bit for bit",
    "force_col_wise": "Sapwood chooses its histogram layout itself",
    "force_row_wise": "Sapwood chooses its histogram layout itself",
    "validate_parameters": "Sapwood always validates parameters",
    "verbosity": "Sapwood's library does not log (use verbose_eval or callbacks for metrics)",
    "verbose": "Sapwood's library does not log (use verbose_eval or callbacks for metrics)",
    "silent": "Sapwood's library does not log (use verbose_eval or callbacks for metrics)",
}

#: LightGBM scikit-learn names that the engine knows under another name.
_RENAMED = {
    "min_split_gain": "gamma",
    "subsample_for_bin": "bin_sample_rows",
}

#: LightGBM's cut-offs of its ranking metrics (``eval_at=[1, 3, 5]``: ``ndcg@1``,
#: ``ndcg@3``, ``ndcg@5``), under each of its names.
_EVAL_AT = frozenset({"eval_at", "ndcg_eval_at", "ndcg_at", "map_eval_at", "map_at"})

#: Names handled here rather than by the engine.
_PYTHON_NAMES = frozenset(
    {"scale_pos_weight", "subsample_freq", "bagging_freq", "disable_default_eval_metric"}
) | _EVAL_AT


def known_names() -> list[str]:
    """Every parameter name accepted: the engine's names and aliases and the peers' names
    handled here."""
    canonical_param("objective")  # fills the table
    assert _ALIASES is not None
    return sorted(set(_ALIASES) | set(_PEER_SETTINGS) | _LOGGING | set(_RENAMED) | _PYTHON_NAMES)


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a):
        cur = [i + 1]
        for j, cb in enumerate(b):
            cur.append(min(prev[j] + (ca != cb), prev[j + 1] + 1, cur[j] + 1))
        prev = cur
    return prev[-1]


def unknown_parameter(name: str) -> ParameterError:
    """The engine's message for an unknown name: ``unknown parameter `x`; did you mean
    `y`?``, with the closest accepted name if one is close (the engine's rule)."""
    key = _clean(name)
    best = min(((_edit_distance(key, n), n) for n in known_names()), default=None)
    message = f"unknown parameter `{name}`"
    if best is not None and best[0] <= max(len(best[1]) // 2, 2):
        message += f"; did you mean `{best[1]}`?"
    return ParameterError(message)


def check_name(name: str) -> None:
    """Raises :class:`ParameterError` (with a suggestion) unless ``name`` is accepted."""
    key = _clean(name)
    if (
        canonical_param(key) is None
        and key not in _PEER_SETTINGS
        and key not in _LOGGING
        and key not in _RENAMED
        and key not in _PYTHON_NAMES
    ):
        raise unknown_parameter(name)


_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """A :class:`UserWarning`, given once per process for each ``key``."""
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, UserWarning, stacklevel=4)


def _text(value: Any) -> str:
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "true" if value else "false"
    return str(value).strip().lower()


def _param_text(value: ParamValue) -> str:
    import json

    import numpy as np

    if isinstance(value, Mapping):
        # ``monotone_constraints={"carat": 1}``: a JSON object the engine reads by name
        return json.dumps({str(k): _plain(v) for k, v in value.items()})
    if (
        isinstance(value, Iterable)
        and not isinstance(value, (str, bytes))
        and any(isinstance(v, Iterable) and not isinstance(v, (str, bytes)) for v in value)
    ):
        # ``interaction_constraints=[[0, 1], ["x2", "x3"]]``: nested lists as JSON
        return json.dumps([[_plain(f) for f in inner] for inner in value])
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, Iterable):
        return ",".join(str(v) for v in value)
    return str(value)


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python number JSON can write; anything else unchanged."""
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


@dataclass
class Normalised:
    """Parameters ready for the engine, and what was taken out of them."""

    #: ``(name, text)`` pairs for the engine, names as the user wrote them.
    pairs: list[tuple[str, str]] = field(default_factory=list)
    #: The user's name of each canonical parameter given.
    user_names: dict[str, str] = field(default_factory=dict)
    #: The weight multiplier of positive rows, if given.
    scale_pos_weight: Optional[float] = None
    #: A custom objective given as ``objective`` (LightGBM's habit), if any.
    objective_fn: Optional[Callable[..., Any]] = None
    #: Custom metric functions given in ``eval_metric``/``metric`` (LightGBM's habit).
    metric_fns: list[Callable[..., Any]] = field(default_factory=list)
    #: XGBoost's ``disable_default_eval_metric``: report only the metrics asked for.
    disable_default_metric: bool = False

    def value(self, canonical: str) -> Optional[str]:
        """The text given for a canonical parameter, if any."""
        for k, v in self.pairs:
            if canonical_param(k) == canonical:
                return v
        return None


def _items(params: Params) -> list[tuple[str, Any]]:
    if isinstance(params, Mapping):
        return [(str(k), v) for k, v in params.items()]
    if isinstance(params, (str, bytes)):
        raise ParameterError(
            "invalid parameter `params`: expected a dict or a list of (name, value) pairs"
        )
    items = []
    for i, item in enumerate(params):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ParameterError(
                f"invalid parameter `params`: item {i} ({item!r}) is not a (name, value) pair"
            )
        items.append((str(item[0]), item[1]))
    return items


def normalise(params: Params) -> Normalised:
    """Checks and translates a parameter set (see the module's description); ``None``
    values mean the engine's default and are left out."""
    out = Normalised()
    metrics: list[str] = []
    metric_name: Optional[str] = None
    depth_given: Optional[tuple[str, Any]] = None
    subsample_freq: Optional[tuple[str, Any]] = None
    eval_at: Optional[tuple[str, list[int]]] = None
    for name, value in _items(params):
        key = _clean(name)
        check_name(key)
        if value is None:
            continue
        if key in _LOGGING:
            warn_once(key, f"parameter `{name}` has no effect: {_NO_EFFECT[key]}")
            continue
        if key in _PEER_SETTINGS:
            accepted, instead = _PEER_SETTINGS[key]
            if _text(value) not in accepted:
                raise ParameterError(
                    f"invalid parameter `{name}`: `{value}` is not available: {instead}"
                    if instead
                    else f"invalid parameter `{name}`: `{value}` is not supported"
                )
            warn_once(key, f"parameter `{name}={value!r}` has no effect: {_NO_EFFECT[key]}")
            continue
        if key in ("subsample_freq", "bagging_freq"):
            subsample_freq = (name, value)
            continue
        if key in _EVAL_AT:
            eval_at = (name, _cut_offs(name, value))
            continue
        if key == "disable_default_eval_metric":
            out.disable_default_metric = _text(value).lower() not in ("0", "false", "")
            continue
        if key == "scale_pos_weight":
            spw = _number(name, value)
            if not (math.isfinite(spw) and spw > 0):
                raise ParameterError(
                    f"invalid parameter `{name}`: {value} must be a finite number > 0"
                )
            out.scale_pos_weight = spw
            continue
        key = _RENAMED.get(key, key)
        canonical = canonical_param(key)
        assert canonical is not None
        if canonical == "objective" and callable(value):
            # LightGBM's way to give a custom objective: ``params["objective"] = fn``
            out.objective_fn = value
            continue
        if canonical == "eval_metric":
            given = [value] if isinstance(value, str) or callable(value) else list(value)
            out.metric_fns.extend(m for m in given if callable(m))
            names = [str(m) for m in given if not callable(m)]
            metrics.extend(names)
            if names:
                metric_name = metric_name or name
            continue
        if canonical == "max_depth" and _is_negative(value):
            depth_given = (name, value)
            value = 0
        if key == "alpha":
            # beside a LightGBM objective name `alpha` is that objective's own parameter, so
            # it may stand beside the L1 penalty's names; the engine reads it
            out.pairs.append((name, _param_text(value)))
            continue
        if canonical in out.user_names and canonical != "eval_metric":
            previous = out.user_names[canonical]
            if previous != name:
                raise ParameterError(
                    f"invalid parameter `{name}`: given twice, as `{previous}` and as `{name}`"
                )
            out.pairs = [(k, v) for k, v in out.pairs if k != name]
        out.user_names[canonical] = name
        out.pairs.append((name, _param_text(value)))
    if eval_at is not None:
        metric_name = metric_name or "eval_metric"
        metrics = _metrics_at(metrics, eval_at[1], out.value("objective"))
    if metrics:
        assert metric_name is not None
        out.user_names["eval_metric"] = metric_name
        out.pairs.append((metric_name, ",".join(metrics)))
    if depth_given is not None:
        leaves = out.value("max_leaves")
        if leaves is None or leaves.strip() in ("0", ""):
            name, value = depth_given
            raise ParameterError(
                f"invalid parameter `{name}`: {value} (no depth limit) needs `max_leaves` "
                "(LightGBM's `num_leaves`) above 0 to bound the trees, e.g. num_leaves=31"
            )
    if subsample_freq is not None:
        _check_subsample_freq(out, *subsample_freq)
    _check_num_leaves_alone(out)
    return out


def _check_num_leaves_alone(out: Normalised) -> None:
    """LightGBM's ``num_leaves`` without a growth policy: LightGBM grows leaf-wise with no
    depth limit, Sapwood depth-wise to ``max_depth`` (6) unless told otherwise; one warning
    says so rather than growing other trees than the user pictures."""
    name = out.user_names.get("max_leaves")
    # (the estimators pass their default, depthwise, whether or not the user chose it)
    if name != "num_leaves" or out.value("grow_policy") not in (None, "depthwise"):
        return
    depth = out.value("max_depth")
    to = "with no depth limit" if depth in ("0", "-1") else (
        f"to max_depth={depth if depth is not None else 6}"
    )
    warn_once(
        "num_leaves",
        f"`num_leaves={out.value('max_leaves')}` only bounds the leaves: Sapwood grows trees "
        f"depth-wise {to}, where LightGBM grows them leaf-wise with no depth limit; for "
        "LightGBM's trees set grow_policy=\"lossguide\" (and max_depth=-1)",
    )


def _cut_offs(name: str, value: Any) -> list[int]:
    """LightGBM's ``eval_at``: an int, a list of ints or a comma-separated string."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, Iterable) or isinstance(items, (bytes, bytearray)):
        items = [items]
    out: list[int] = []
    for item in items:
        k = _number(name, item)
        if not (k >= 1 and k == int(k)):
            raise ParameterError(
                f"invalid parameter `{name}`: {item!r} is not a cut-off (a whole number >= 1)"
            )
        out.append(int(k))
    return out


def _metrics_at(metrics: list[str], ks: list[int], objective: Optional[str]) -> list[str]:
    """LightGBM's ``eval_at``: every ranking metric named without a cut-off (``ndcg``,
    ``map``; the objective's when none is named) reported at each cut-off."""
    if not metrics:
        name = (objective or "").strip().lower()
        metrics = ["map" if name in ("rank:map", "map") else "ndcg"]
    out: list[str] = []
    for m in metrics:
        base = m.strip().lower()
        base = "ndcg" if base == "lambdarank" else base
        if base in ("ndcg", "map"):
            out.extend(f"{base}@{k}" for k in ks)
        else:
            out.append(m)
    return out


def _check_subsample_freq(out: Normalised, name: str, value: Any) -> None:
    """LightGBM samples rows every ``subsample_freq`` rounds (never for 0); Sapwood samples
    every round, which is ``subsample_freq=1``, or no sampling at all."""
    freq = int(_number(name, value))
    subsample = out.value("subsample")
    sampling = subsample is not None and float(subsample) < 1.0
    if freq == 1 or not sampling:
        warn_once(
            "subsample_freq",
            f"parameter `{name}={value!r}` has no effect: Sapwood samples rows every round "
            "when subsample < 1",
        )
        return
    raise ParameterError(
        f"invalid parameter `{name}`: {value} is not available: Sapwood samples rows every "
        "round when subsample < 1 (subsample_freq=1); leave subsample at 1 for no sampling"
    )


def _number(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"invalid parameter `{name}`: `{value}` is not a valid number") from None


def _is_negative(value: Any) -> bool:
    try:
        return float(value) < 0
    except (TypeError, ValueError):
        return False


_NAMED = re.compile(r"^(invalid parameter `)([^`]+)(`)")


def renamed(error: ParameterError, user_names: Mapping[str, str]) -> ParameterError:
    """``error`` naming the parameter as the user wrote it (the engine names canonical
    parameters: ``num_rounds`` for ``n_estimators``)."""
    message = str(error)
    m = _NAMED.match(message)
    if m is None:
        return error
    user = user_names.get(m.group(2))
    if user is None or user == m.group(2):
        return error
    return ParameterError(_NAMED.sub(lambda g: f"{g.group(1)}{user}{g.group(3)}", message, count=1))
