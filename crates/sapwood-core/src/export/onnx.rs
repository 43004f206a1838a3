//! ONNX model (`onnxruntime.InferenceSession`): one `ai.onnx.ml` `TreeEnsembleRegressor`
//! (ML opset 3, IR version 8, default opset 17) emitting the margins, then one standard
//! operator for the objective's output.
//!
//! * Input `input`: float32 `[N, F]`, features in the model's order (metadata
//!   `sapwood_feature_names`); categorical features as level codes (below), NaN for missing.
//! * Outputs: `margin`, float32 `[N, groups]` (one target per class for multiclass, per
//!   quantile for several `quantile_alpha`), and `prediction`, the objective's output from
//!   the margins: `Sigmoid` (`binary:logistic`), `Softmax` over the classes
//!   (`multi:softprob`), `ArgMax` to an int64 class index `[N]` (`multi:softmax`), `Exp`
//!   (log links), else `Identity`. Standard operators rather than the ensemble's
//!   `post_transform` keep the margins available (and `post_transform` has no `Exp`).
//! * Numeric split: TreeEnsemble compares in f32 when the input and thresholds are f32;
//!   `BRANCH_LEQ` with Sapwood's own f32 threshold `T` sends `x <= T` to the true (left)
//!   branch, exactly Sapwood's bin rule. A split sending every non-missing value left gets
//!   `T = +inf`.
//! * Missing (NaN): `nodes_missing_value_tracks_true` = the learned `default_left`.
//! * Categorical split: TreeEnsembleRegressor has no set membership, only comparisons; a
//!   split becomes a balanced search over the (ascending) codes leaving the default
//!   direction: `BRANCH_LEQ` nodes halve them down to buckets of 8, each a short chain of
//!   `BRANCH_EQ` links sending a match to the non-default child (see `CodeSearch` for the
//!   layout onnxruntime requires). Depth grows as log2 of the codes: the plain chain of
//!   equalities LightGBM's converters write crashed onnxruntime 1.32 at thousands of codes
//!   (it recurses once per link). NaN, unknown codes and non-integers match no code and
//!   take the default way, like Sapwood's unseen levels. A code is the level's index in the model's level list (metadata
//!   `sapwood_categories`, JSON `{feature: [level, ...]}`). A split sending every level the
//!   default way is `x <= +inf` with missing values tracking the default child too.
//! * Base margin: folded into each group's first tree (see [`super`]), so onnxruntime adds
//!   the same f32 values in Sapwood's order (it sums a row's trees in tree order; the
//!   margins are bit-identical in the tests); `base_values` is left unset (0).
//! * Tree ids are Sapwood's tree indices (round-major, group = index % groups); node ids
//!   count from 0 in each tree, a categorical split taking the nodes of its search.

use serde_json::{json, Map, Value};

use super::onnx_proto::Message;
use super::{check, level_lists, route, split_of, trees_with_base, Route};
use crate::error::Result;
use crate::model::Model;
use crate::objective::ObjectiveKind;
use crate::tree::Tree;

/// ONNX IR version written (IR 8 is ONNX 1.12's, the release of default opset 17; tested
/// with onnx 1.23 and onnxruntime 1.32).
const IR_VERSION: i64 = 8;
/// The default-domain operator set (Sigmoid, Softmax, Exp, ArgMax, Identity).
const OPSET: i64 = 17;
/// The `ai.onnx.ml` operator set (TreeEnsembleRegressor 3).
const ML_OPSET: i64 = 3;
/// The ML domain's name.
const ML_DOMAIN: &str = "ai.onnx.ml";

/// `TensorProto.DataType` values.
const FLOAT: i64 = 1;
const INT64: i64 = 7;

/// `AttributeProto.AttributeType` values.
const ATTR_INT: i64 = 2;
const ATTR_STRING: i64 = 3;
const ATTR_FLOATS: i64 = 6;
const ATTR_INTS: i64 = 7;
const ATTR_STRINGS: i64 = 8;

/// Field numbers of onnx.proto's messages (checked against onnx/onnx.proto).
mod field {
    pub const MODEL_IR_VERSION: u32 = 1;
    pub const MODEL_PRODUCER_NAME: u32 = 2;
    pub const MODEL_PRODUCER_VERSION: u32 = 3;
    pub const MODEL_DOC_STRING: u32 = 6;
    pub const MODEL_GRAPH: u32 = 7;
    pub const MODEL_OPSET_IMPORT: u32 = 8;
    pub const MODEL_METADATA_PROPS: u32 = 14;
    pub const OPSET_DOMAIN: u32 = 1;
    pub const OPSET_VERSION: u32 = 2;
    pub const ENTRY_KEY: u32 = 1;
    pub const ENTRY_VALUE: u32 = 2;
    pub const GRAPH_NODE: u32 = 1;
    pub const GRAPH_NAME: u32 = 2;
    pub const GRAPH_INPUT: u32 = 11;
    pub const GRAPH_OUTPUT: u32 = 12;
    pub const NODE_INPUT: u32 = 1;
    pub const NODE_OUTPUT: u32 = 2;
    pub const NODE_NAME: u32 = 3;
    pub const NODE_OP_TYPE: u32 = 4;
    pub const NODE_ATTRIBUTE: u32 = 5;
    pub const NODE_DOMAIN: u32 = 7;
    pub const ATTR_NAME: u32 = 1;
    pub const ATTR_I: u32 = 3;
    pub const ATTR_S: u32 = 4;
    pub const ATTR_FLOATS: u32 = 7;
    pub const ATTR_INTS: u32 = 8;
    pub const ATTR_STRINGS: u32 = 9;
    pub const ATTR_TYPE: u32 = 20;
    pub const VALUE_INFO_NAME: u32 = 1;
    pub const VALUE_INFO_TYPE: u32 = 2;
    pub const TYPE_TENSOR: u32 = 1;
    pub const TENSOR_ELEM_TYPE: u32 = 1;
    pub const TENSOR_SHAPE: u32 = 2;
    pub const SHAPE_DIM: u32 = 1;
    pub const DIM_VALUE: u32 = 1;
    pub const DIM_PARAM: u32 = 2;
}

/// A node's comparison, as TreeEnsemble names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `x <= value` goes to the true branch.
    Leq,
    /// `x == value` goes to the true branch.
    Eq,
    /// `x != value` goes to the true branch.
    Neq,
    /// A leaf.
    Leaf,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Leq => "BRANCH_LEQ",
            Mode::Eq => "BRANCH_EQ",
            Mode::Neq => "BRANCH_NEQ",
            Mode::Leaf => "LEAF",
        }
    }
}

/// The TreeEnsembleRegressor attributes as flat arrays (the `nodes_*` and `target_*`
/// tuples of the operator's definition).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Ensemble {
    /// Output targets (the model's groups).
    pub n_targets: usize,
    /// Tree id of each node.
    pub tree: Vec<i64>,
    /// Node id of each node within its tree.
    pub node: Vec<i64>,
    /// Feature compared (0 for leaves).
    pub feature: Vec<i64>,
    /// Comparison.
    pub mode: Vec<Mode>,
    /// Threshold or code compared with (0 for leaves).
    pub value: Vec<f32>,
    /// Node id taken when the comparison holds.
    pub true_id: Vec<i64>,
    /// Node id taken otherwise.
    pub false_id: Vec<i64>,
    /// Whether NaN takes the true branch.
    pub missing_true: Vec<i64>,
    /// Tree id of each leaf weight.
    pub target_tree: Vec<i64>,
    /// Node id of each leaf weight.
    pub target_node: Vec<i64>,
    /// Target (group) of each leaf weight.
    pub target: Vec<i64>,
    /// Leaf weights.
    pub weight: Vec<f32>,
}

impl Ensemble {
    fn push(&mut self, t: usize, id: usize, n: Pushed) {
        self.tree.push(t as i64);
        self.node.push(id as i64);
        self.feature.push(n.feature as i64);
        self.mode.push(n.mode);
        self.value.push(n.value);
        self.true_id.push(n.on_true as i64);
        self.false_id.push(n.on_false as i64);
        self.missing_true.push(i64::from(n.missing_true));
    }
}

/// One ONNX node before it is appended.
struct Pushed {
    feature: usize,
    mode: Mode,
    value: f32,
    on_true: usize,
    on_false: usize,
    missing_true: bool,
}

/// Appends tree `t` (output group `group`) to `e`; a split it cannot express is an error
/// naming the tree and node.
fn add_tree(model: &Model, t: usize, group: usize, tree: &Tree, e: &mut Ensemble) -> Result<()> {
    let mut routes = Vec::with_capacity(tree.nodes.len());
    for (i, node) in tree.nodes.iter().enumerate() {
        routes.push(match split_of(node) {
            Some(s) => Some(route(model, t, i, s)?),
            None => None,
        });
    }
    // each Sapwood node's first ONNX id: a categorical split takes the nodes of its search
    let mut first = Vec::with_capacity(tree.nodes.len());
    let mut next = 0usize;
    for r in &routes {
        first.push(next);
        next += match r {
            Some(Route::Categorical { off_default }) if off_default.is_empty() => 1,
            Some(Route::Categorical { off_default }) => CodeSearch::size(off_default.len()),
            _ => 1,
        };
    }
    for (i, node) in tree.nodes.iter().enumerate() {
        let id = first[i];
        let (Some(s), Some(r)) = (split_of(node), &routes[i]) else {
            e.push(
                t,
                id,
                Pushed {
                    feature: 0,
                    mode: Mode::Leaf,
                    value: 0.0,
                    on_true: 0,
                    on_false: 0,
                    missing_true: false,
                },
            );
            e.target_tree.push(t as i64);
            e.target_node.push(id as i64);
            e.target.push(group as i64);
            e.weight.push(node.value);
            continue;
        };
        let (left, right) = (first[s.left.index()], first[s.right.index()]);
        let (default, other) = if s.default_left {
            (left, right)
        } else {
            (right, left)
        };
        match r {
            Route::Numeric { le } => e.push(
                t,
                id,
                Pushed {
                    feature: s.feature,
                    mode: Mode::Leq,
                    // +inf: every non-missing value is <= it
                    value: le.unwrap_or(f32::INFINITY),
                    on_true: left,
                    on_false: right,
                    missing_true: s.default_left,
                },
            ),
            Route::Categorical { off_default } if off_default.is_empty() => e.push(
                t,
                id,
                Pushed {
                    feature: s.feature,
                    mode: Mode::Leq,
                    value: f32::INFINITY,
                    on_true: default,
                    on_false: other,
                    missing_true: true,
                },
            ),
            Route::Categorical { off_default } => {
                let search = CodeSearch {
                    t,
                    group,
                    feature: s.feature,
                    other,
                    default,
                };
                search.push(off_default, id, e);
            }
        }
    }
    Ok(())
}

/// Codes per bucket at the bottom of a categorical split's search.
const BUCKET: usize = 8;

/// The nodes that send the codes of one categorical split off its default way.
///
/// onnxruntime lays a tree out with each node's false child right after it: a node may be
/// the true child of many (how LightGBM's converters share a chain's target), but the false
/// child of one only, and it recurses down false children. So the search keeps every false
/// edge to a node of its own: `BRANCH_LEQ` nodes halve the codes (their children are
/// disjoint subtrees); a bucket of up to [`BUCKET`] codes is a chain of `BRANCH_EQ` links
/// (match: the non-default child, as a true edge; else the next link) ending in a
/// `BRANCH_NEQ` on its last code, whose true edge reaches the default child; its false edge
/// (the last code matched) goes to a `BRANCH_LEQ x <= +inf` that NaN-tracks true, so always
/// takes its true edge to the non-default child, and whose false edge needs a leaf of its
/// own that no row reaches (weight 0).
pub(crate) struct CodeSearch {
    pub t: usize,
    pub group: usize,
    pub feature: usize,
    /// the node id of the non-default child
    pub other: usize,
    /// the node id of the default child
    pub default: usize,
}

impl CodeSearch {
    /// The ONNX nodes a search over `m` codes takes.
    pub fn size(m: usize) -> usize {
        if m <= BUCKET {
            m + 2
        } else {
            let low = Self::low_len(m);
            1 + Self::size(low) + Self::size(m - low)
        }
    }

    /// Codes of the lower half of `m` codes: whole buckets.
    fn low_len(m: usize) -> usize {
        m.div_ceil(BUCKET) / 2 * BUCKET
    }

    /// Appends the search over `codes` (ascending, at least one) as nodes
    /// `id..id + size(codes.len())`, the root first; returns the next free id.
    pub fn push(&self, codes: &[u32], id: usize, e: &mut Ensemble) -> usize {
        let node = |mode, value: f32, on_true, on_false, missing_true| Pushed {
            feature: self.feature,
            mode,
            value,
            on_true,
            on_false,
            missing_true,
        };
        if codes.len() <= BUCKET {
            let (last, links) = codes.split_last().expect("at least one code");
            let mut at = id;
            for &code in links {
                // codes are below 2^24 (checked by `route`): exact in f32; NaN fails
                // every equality and reaches the default child
                e.push(
                    self.t,
                    at,
                    node(Mode::Eq, code as f32, self.other, at + 1, false),
                );
                at += 1;
            }
            e.push(
                self.t,
                at,
                node(Mode::Neq, *last as f32, self.default, at + 1, true),
            );
            e.push(
                self.t,
                at + 1,
                node(Mode::Leq, f32::INFINITY, self.other, at + 2, true),
            );
            e.push(self.t, at + 2, node(Mode::Leaf, 0.0, 0, 0, false));
            e.target_tree.push(self.t as i64);
            e.target_node.push((at + 2) as i64);
            e.target.push(self.group as i64);
            e.weight.push(0.0);
            return at + 3;
        }
        let (low, high) = codes.split_at(Self::low_len(codes.len()));
        let here = e.node.len();
        // NaN searches the upper half and fails its equalities there
        e.push(
            self.t,
            id,
            node(Mode::Leq, low[low.len() - 1] as f32, id + 1, 0, false),
        );
        let high_id = self.push(low, id + 1, e);
        e.false_id[here] = high_id as i64;
        self.push(high, high_id, e)
    }
}

/// The ensemble of the model's trees (base margin folded in); a split TreeEnsemble cannot
/// express is an error naming the tree and node.
pub(crate) fn ensemble(model: &Model) -> Result<Ensemble> {
    check(model)?;
    let k = model.groups;
    let mut e = Ensemble {
        n_targets: k,
        ..Ensemble::default()
    };
    for (t, tree) in trees_with_base(model).iter().enumerate() {
        add_tree(model, t, t % k, tree, &mut e)?;
    }
    Ok(e)
}

/// The operator turning margins into the objective's output, with its attributes.
fn output_op(objective: ObjectiveKind) -> (&'static str, Vec<Message>) {
    match objective {
        ObjectiveKind::Logistic => ("Sigmoid", Vec::new()),
        ObjectiveKind::Softprob => ("Softmax", vec![int_attr("axis", 1)]),
        ObjectiveKind::Softmax => (
            "ArgMax",
            // the first largest margin, as Sapwood's argmax
            vec![int_attr("axis", 1), int_attr("keepdims", 0)],
        ),
        k if k.has_log_link() => ("Exp", Vec::new()),
        // identity links: regression, ranking scores, logitraw, custom objectives
        _ => ("Identity", Vec::new()),
    }
}

fn int_attr(name: &str, v: i64) -> Message {
    let mut a = Message::new();
    a.string(field::ATTR_NAME, name)
        .int64(field::ATTR_I, v)
        .int64(field::ATTR_TYPE, ATTR_INT);
    a
}

fn string_attr(name: &str, v: &str) -> Message {
    let mut a = Message::new();
    a.string(field::ATTR_NAME, name)
        .string(field::ATTR_S, v)
        .int64(field::ATTR_TYPE, ATTR_STRING);
    a
}

fn ints_attr(name: &str, v: &[i64]) -> Message {
    let mut a = Message::new();
    a.string(field::ATTR_NAME, name)
        .int64s(field::ATTR_INTS, v)
        .int64(field::ATTR_TYPE, ATTR_INTS);
    a
}

fn floats_attr(name: &str, v: &[f32]) -> Message {
    let mut a = Message::new();
    a.string(field::ATTR_NAME, name)
        .floats(field::ATTR_FLOATS, v)
        .int64(field::ATTR_TYPE, ATTR_FLOATS);
    a
}

fn strings_attr(name: &str, v: &[&str]) -> Message {
    let mut a = Message::new();
    a.string(field::ATTR_NAME, name)
        .strings(field::ATTR_STRINGS, v)
        .int64(field::ATTR_TYPE, ATTR_STRINGS);
    a
}

fn node(
    name: &str,
    op: &str,
    domain: &str,
    input: &str,
    output: &str,
    attrs: &[Message],
) -> Message {
    let mut n = Message::new();
    n.string(field::NODE_INPUT, input)
        .string(field::NODE_OUTPUT, output)
        .string(field::NODE_NAME, name)
        .string(field::NODE_OP_TYPE, op);
    for a in attrs {
        n.message(field::NODE_ATTRIBUTE, a);
    }
    if !domain.is_empty() {
        n.string(field::NODE_DOMAIN, domain);
    }
    n
}

/// A dimension of a tensor shape: a size, or a symbolic name for the rows.
enum Dim<'a> {
    Size(i64),
    Named(&'a str),
}

fn value_info(name: &str, elem_type: i64, dims: &[Dim<'_>]) -> Message {
    let mut shape = Message::new();
    for d in dims {
        let mut dim = Message::new();
        match d {
            Dim::Size(n) => dim.int64(field::DIM_VALUE, *n),
            Dim::Named(s) => dim.string(field::DIM_PARAM, s),
        };
        shape.message(field::SHAPE_DIM, &dim);
    }
    let mut tensor = Message::new();
    tensor
        .int64(field::TENSOR_ELEM_TYPE, elem_type)
        .message(field::TENSOR_SHAPE, &shape);
    let mut ty = Message::new();
    ty.message(field::TYPE_TENSOR, &tensor);
    let mut v = Message::new();
    v.string(field::VALUE_INFO_NAME, name)
        .message(field::VALUE_INFO_TYPE, &ty);
    v
}

fn opset(domain: &str, version: i64) -> Message {
    let mut o = Message::new();
    if !domain.is_empty() {
        o.string(field::OPSET_DOMAIN, domain);
    }
    o.int64(field::OPSET_VERSION, version);
    o
}

fn entry(key: &str, value: &str) -> Message {
    let mut m = Message::new();
    m.string(field::ENTRY_KEY, key)
        .string(field::ENTRY_VALUE, value);
    m
}

/// The ensemble's operator node.
fn ensemble_node(e: &Ensemble) -> Message {
    let modes: Vec<&str> = e.mode.iter().map(|m| m.name()).collect();
    let attrs = [
        int_attr("n_targets", e.n_targets as i64),
        ints_attr("nodes_falsenodeids", &e.false_id),
        ints_attr("nodes_featureids", &e.feature),
        ints_attr("nodes_missing_value_tracks_true", &e.missing_true),
        strings_attr("nodes_modes", &modes),
        ints_attr("nodes_nodeids", &e.node),
        ints_attr("nodes_treeids", &e.tree),
        ints_attr("nodes_truenodeids", &e.true_id),
        floats_attr("nodes_values", &e.value),
        string_attr("post_transform", "NONE"),
        ints_attr("target_ids", &e.target),
        ints_attr("target_nodeids", &e.target_node),
        ints_attr("target_treeids", &e.target_tree),
        floats_attr("target_weights", &e.weight),
    ];
    node(
        "trees",
        "TreeEnsembleRegressor",
        ML_DOMAIN,
        "input",
        "margin",
        &attrs,
    )
}

/// What the file says about its input and outputs (the model's doc string).
const DOC: &str = "Sapwood gradient-boosted trees. Input `input`: float32 [N, features] in the \
order of metadata `sapwood_feature_names`; NaN is missing; a categorical feature is fed as \
its level's index in metadata `sapwood_categories` (unknown levels as NaN). Output `margin`: \
float32 [N, groups], Sapwood's margins, base margin included; `prediction`: the objective's \
output (metadata `sapwood_objective`).";

/// The model as ONNX protobuf bytes; a split TreeEnsemble cannot express is an error naming
/// the tree and node.
pub fn to_bytes(model: &Model) -> Result<Vec<u8>> {
    let e = ensemble(model)?;
    let k = e.n_targets as i64;
    let n_features = model.feature_names.len() as i64;
    let objective = model.params.objective;
    let (op, attrs) = output_op(objective);
    let prediction = if objective == ObjectiveKind::Softmax {
        value_info("prediction", INT64, &[Dim::Named("N")])
    } else {
        value_info("prediction", FLOAT, &[Dim::Named("N"), Dim::Size(k)])
    };
    let mut graph = Message::new();
    graph
        .message(field::GRAPH_NODE, &ensemble_node(&e))
        .message(
            field::GRAPH_NODE,
            &node("output", op, "", "margin", "prediction", &attrs),
        )
        .string(field::GRAPH_NAME, "sapwood")
        .message(
            field::GRAPH_INPUT,
            &value_info("input", FLOAT, &[Dim::Named("N"), Dim::Size(n_features)]),
        )
        .message(
            field::GRAPH_OUTPUT,
            &value_info("margin", FLOAT, &[Dim::Named("N"), Dim::Size(k)]),
        )
        .message(field::GRAPH_OUTPUT, &prediction);
    let mut categories = Map::new();
    for (name, l) in model.feature_names.iter().zip(level_lists(model)) {
        if let Some(l) = l {
            categories.insert(name.clone(), json!(l));
        }
    }
    let mut props = vec![
        (
            "sapwood_feature_names",
            json!(model.feature_names).to_string(),
        ),
        ("sapwood_categories", Value::Object(categories).to_string()),
        ("sapwood_objective", objective.name().to_string()),
    ];
    if let Some(c) = &model.classes {
        props.push(("sapwood_classes", json!(c).to_string()));
    }
    if let Some(b) = model.best_iteration {
        props.push(("sapwood_best_iteration", b.to_string()));
    }
    let mut file = Message::new();
    file.int64(field::MODEL_IR_VERSION, IR_VERSION)
        .string(field::MODEL_PRODUCER_NAME, "sapwood")
        .string(field::MODEL_PRODUCER_VERSION, env!("CARGO_PKG_VERSION"))
        .string(field::MODEL_DOC_STRING, DOC)
        .message(field::MODEL_GRAPH, &graph)
        .message(field::MODEL_OPSET_IMPORT, &opset("", OPSET))
        .message(field::MODEL_OPSET_IMPORT, &opset(ML_DOMAIN, ML_OPSET));
    for (key, value) in &props {
        file.message(field::MODEL_METADATA_PROPS, &entry(key, value));
    }
    Ok(file.into_bytes())
}
