//! Split finding: pure functions every backend shares, with deterministic tie-breaks.

mod evaluate;
mod gain;
mod screen;

pub use evaluate::{
    best_split, best_split_with, within_variance, LevelNoise, NodeRules, NodeView, Units,
    ROOT_NOISE_FLOOR,
};
pub(crate) use evaluate::{bounded, unshrunk_levels};
pub use gain::{leaf_gain, leaf_gain_at, leaf_weight, CatNoise, SplitParams, MIN_SPLIT_GAIN};

/// A set of bins of one feature (the bins a categorical split sends left).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BinSet {
    words: Vec<u64>,
}

impl BinSet {
    /// The set holding `bins`.
    pub fn from_bins(bins: impl IntoIterator<Item = u16>) -> Self {
        let mut s = BinSet { words: Vec::new() };
        for b in bins {
            s.insert(b);
        }
        s
    }

    /// Adds a bin.
    pub fn insert(&mut self, bin: u16) {
        let w = bin as usize / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (bin % 64);
    }

    /// Whether `bin` is in the set.
    #[inline]
    pub fn contains(&self, bin: u16) -> bool {
        self.words
            .get(bin as usize / 64)
            .is_some_and(|w| w & (1 << (bin % 64)) != 0)
    }

    /// The bins, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u16)
                .filter(move |b| w & (1 << b) != 0)
                .map(move |b| i as u16 * 64 + b)
        })
    }

    /// The set as bits, bin b at bit b % 64 of word b / 64 (no word past the largest bin).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The smallest bin, for ordering candidates.
    pub fn first(&self) -> Option<u16> {
        self.iter().next()
    }
}

/// How a node routes a row by its bin of the split feature.
#[derive(Debug, Clone, PartialEq)]
pub enum SplitRule {
    /// Bins 1..=bin go left, the rest right.
    Numeric {
        /// The last bin on the left.
        bin: u16,
    },
    /// Bins in the set go left, the rest right.
    Categorical {
        /// The bins going left.
        left: BinSet,
    },
}

impl SplitRule {
    /// Whether a row with `bin` goes left; bin 0 (missing) follows `default_left`.
    #[inline]
    pub fn goes_left(&self, bin: u16, default_left: bool) -> bool {
        if bin == 0 {
            return default_left;
        }
        match self {
            SplitRule::Numeric { bin: b } => bin <= *b,
            SplitRule::Categorical { left } => left.contains(bin),
        }
    }

    /// A number that orders candidates of one feature: the numeric bin or the first level.
    fn order_key(&self) -> u16 {
        match self {
            SplitRule::Numeric { bin } => *bin,
            SplitRule::Categorical { left } => left.first().unwrap_or(0),
        }
    }
}

/// The best split found for a node, with its children's integer sums.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitCandidate {
    /// Feature index.
    pub feature: usize,
    /// Routing rule.
    pub rule: SplitRule,
    /// Where missing values go.
    pub default_left: bool,
    /// Loss reduction (XGBoost's `loss_chg`).
    pub gain: f64,
    /// (Σg, Σh) of the left child in histogram units.
    pub left: [i64; 2],
    /// (Σg, Σh) of the right child in histogram units.
    pub right: [i64; 2],
}

impl SplitCandidate {
    /// Whether `self` beats `other`: larger gain, then smaller feature, then smaller bin,
    /// then missing-right first. Every worker and backend ranks candidates this way.
    pub fn beats(&self, other: &SplitCandidate) -> bool {
        if self.gain != other.gain {
            return self.gain > other.gain;
        }
        if self.feature != other.feature {
            return self.feature < other.feature;
        }
        if self.rule.order_key() != other.rule.order_key() {
            return self.rule.order_key() < other.rule.order_key();
        }
        !self.default_left && other.default_left
    }
}

/// Keeps the better of two optional candidates.
pub fn pick(a: Option<SplitCandidate>, b: Option<SplitCandidate>) -> Option<SplitCandidate> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.beats(&a) { b } else { a }),
        (a, None) => a,
        (None, b) => b,
    }
}
