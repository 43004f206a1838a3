//! Passing over split candidates that are surely below a floor, a block of bins at a time.
//!
//! The plain numeric scan ([`super::evaluate`]) must compute a candidate's gain with two
//! divisions, in order, to keep its bits. Most candidates cannot win, and [`below_floor`]
//! proves that with products alone. Done one candidate at a time, between the divisions,
//! that test was most of the scan; here it runs over a block of bins in vector lanes (the
//! left sums of a block kept as two arrays), and the scan then visits only the candidates
//! it could not rule out.

/// 1 − 2^-30: the margin by which [`below_floor`] must find a candidate under its floor.
const SCREEN: f64 = 1.0 - 1.0 / (1u64 << 30) as f64;

/// Bins a block holds.
pub const BLOCK: usize = 64;

/// A candidate the scan must visit with the missing values going right.
pub const RIGHT: u8 = 1;
/// A candidate the scan must visit with the missing values going left.
pub const LEFT: u8 = 2;

/// Whether a candidate whose gain is computed as `a/b + c/d − parent` (a = g_L², b = h_L + λ,
/// c = g_R², d = h_R + λ, each one rounded operation as the plain scan does) is surely
/// below `floor` (> 0), judged by products instead of the two divisions.
///
/// Why it is sound: with S = a/b + c/d exactly, the computed gain is at most
/// S(1+u)² − parent rounded, which stays below `floor` whenever S ≤ (floor + parent)(1 − 5u)
/// (u = 2⁻⁵³; a, c, parent ≥ 0). The test is a·d + c·b < (floor + parent)·b·d·SCREEN, each
/// side rounded a few times: the 2⁻³⁰ margin exceeds their relative errors (≤ 11u) by
/// far. Any overflow, a subnormal product on the right, a NaN or b, d ≤ 0 says "not
/// surely", and the candidate is computed in full.
#[inline(always)]
fn below_floor(a: f64, b: f64, c: f64, d: f64, floor: f64, parent: f64) -> bool {
    let kb = (floor + parent) * b;
    let rhs = kb * d;
    let lhs = a * d + c * b;
    // `&` rather than `&&`: no branch, so that a block runs in vector lanes
    (b > 0.0)
        & (d > 0.0)
        & (kb >= f64::MIN_POSITIVE)
        & (f64::MIN_POSITIVE..=f64::MAX).contains(&rhs)
        & (lhs < rhs * SCREEN)
}

/// What [`Screen::mark`] needs: the node's sums and units, λ, the parent's gain and the
/// floor: the scan's floor when the block starts.
///
/// Why passing over what it rules out changes nothing: were such a candidate visited, the
/// scan would test it against its floor at that moment. Where that floor is still the
/// block's, it is the same test on the same values, and the scan passes over it too.
/// Where the floor has risen, it rose because the scan took a best with that gain (it
/// rises only so), and the candidate's computed gain, below the block's floor since the
/// test is sound, is below that best and is not taken (`g > best` fails). Either way the
/// scan takes exactly what it took before, candidates below the floor included. (The test
/// is not monotone in the floor everywhere: where (floor + parent)·b·d overflows at the
/// higher floor it says "not surely" again; the argument does not need it to be.)
#[derive(Debug, Clone, Copy)]
pub struct Screen {
    /// The node's (Σg, Σh) in histogram units.
    pub total: [i64; 2],
    /// Real value of a gradient and of a hessian unit.
    pub units: [f64; 2],
    /// L2 regularisation.
    pub lambda: f64,
    /// The gain a candidate must reach.
    pub floor: f64,
    /// The parent's gain.
    pub parent: f64,
}

impl Screen {
    /// The real (g_L, h_L, g_R, h_R) of the candidate with left sums (g, h): the terms of
    /// its gain, for the screen and the scan alike (the screen's argument needs the same
    /// values in both).
    #[inline(always)]
    pub fn sides(&self, g: i64, h: i64) -> [f64; 4] {
        let [ug, uh] = self.units;
        [
            g as f64 * ug,
            h as f64 * uh,
            (self.total[0] - g) as f64 * ug,
            (self.total[1] - h) as f64 * uh,
        ]
    }

    /// Whether a candidate with these [`Screen::sides`] is surely below `floor`
    /// ([`below_floor`]).
    #[inline(always)]
    pub fn below(&self, [gl, hl, gr, hr]: [f64; 4], floor: f64) -> bool {
        below_floor(
            gl * gl,
            hl + self.lambda,
            gr * gr,
            hr + self.lambda,
            floor,
            self.parent,
        )
    }

    /// Whether the candidate with left sums (g, h) is surely below the block's floor.
    #[inline(always)]
    fn surely_below(&self, g: i64, h: i64) -> bool {
        self.below(self.sides(g, h), self.floor)
    }

    #[inline(always)]
    fn mark_in_lanes(&self, g: &[i64], h: &[i64], miss: [i64; 2], out: &mut [u8]) {
        for ((o, &g), &h) in out.iter_mut().zip(g).zip(h) {
            let right = !self.surely_below(g, h) as u8;
            let left = !self.surely_below(g + miss[0], h + miss[1]) as u8;
            *o = (right * RIGHT) | (left * LEFT);
        }
    }

    /// `out[j]`: [`RIGHT`] and/or [`LEFT`] where the candidate with left sums
    /// (`g[j]`, `h[j]`) (plus `miss` when missing values go left) is not surely below the
    /// floor. In 512-bit lanes where the CPU has them (their i64 to f64 conversion is one
    /// instruction; elsewhere each lane converts on its own), else in 256-bit AVX2 lanes.
    pub fn mark(&self, g: &[i64], h: &[i64], miss: [i64; 2], out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx512_allowed()
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            #[target_feature(enable = "avx512f,avx512dq")]
            #[allow(unsafe_code)]
            unsafe fn wide(s: &Screen, g: &[i64], h: &[i64], miss: [i64; 2], out: &mut [u8]) {
                s.mark_in_lanes(g, h, miss, out)
            }
            // SAFETY: the CPU has the features `wide` is compiled for (checked above).
            #[allow(unsafe_code)]
            unsafe {
                wide(self, g, h, miss, out)
            };
            return;
        }
        #[cfg(target_arch = "x86_64")]
        if crate::simd::avx2() {
            // SAFETY: the CPU has AVX2 (checked by `simd::avx2`).
            #[allow(unsafe_code)]
            unsafe {
                self.mark_avx2(g, h, miss, out)
            };
            return;
        }
        self.mark_in_lanes(g, h, miss, out)
    }

    /// [`Screen::mark_in_lanes`] compiled for AVX2's 256-bit lanes (its i64 to f64
    /// conversions stay one lane at a time). Rust fuses no product into a sum, so the bits
    /// are the portable path's.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[allow(unsafe_code)]
    unsafe fn mark_avx2(&self, g: &[i64], h: &[i64], miss: [i64; 2], out: &mut [u8]) {
        self.mark_in_lanes(g, h, miss, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn marks_in_lanes_are_below_floor_candidate_by_candidate(
            lefts in proptest::collection::vec(
                prop_oneof![
                    (-1i64 << 40..1i64 << 40, -1i64..1 << 40),
                    (any::<i64>(), any::<i64>()).prop_map(|(g, h)| (g >> 2, h >> 2)),
                ],
                0..BLOCK + 1,
            ),
            total in (-1i64 << 41..1i64 << 41, 0i64..1 << 41),
            miss in (-1i64 << 30..1i64 << 30, 0i64..1 << 30),
            units in prop_oneof![
                Just([2f64.powi(-40), 2f64.powi(-41)]),
                Just([1e150, 1e150]),
                Just([1.0, 1.0]),
                Just([1e-170, 1e-170]),
            ],
            lambda in prop_oneof![Just(0.0f64), 0.0f64..3.0],
            floor in prop_oneof![Just(1e-6f64), 1e-6f64..50.0, Just(1e300)],
            parent in prop_oneof![Just(0.0f64), 0.0f64..100.0],
            at_median in any::<bool>(),
        ) {
            let miss = [miss.0, miss.1];
            let (g, h): (Vec<i64>, Vec<i64>) = lefts.iter().copied().unzip();
            let mut s = Screen { total: [total.0, total.1], units, lambda, floor, parent };
            if at_median {
                // a floor among the candidates' own gains, so that the marks split both ways
                let mut gains: Vec<f64> = g.iter().zip(&h)
                    .flat_map(|(&g, &h)| [(g, h), (g + miss[0], h + miss[1])])
                    .map(|(g, h)| {
                        let [gl, hl, gr, hr] = s.sides(g, h);
                        gl * gl / (hl + lambda) + gr * gr / (hr + lambda) - parent
                    })
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .collect();
                gains.sort_by(f64::total_cmp);
                if let Some(&m) = gains.get(gains.len() / 2) {
                    s.floor = m;
                }
            }
            let (mut lanes, mut dispatched) = (vec![0u8; g.len()], vec![9u8; g.len()]);
            s.mark_in_lanes(&g, &h, miss, &mut lanes);
            s.mark(&g, &h, miss, &mut dispatched);
            prop_assert_eq!(&lanes, &dispatched);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut avx2 = vec![9u8; g.len()];
                // SAFETY: the CPU has AVX2
                #[allow(unsafe_code)]
                unsafe { s.mark_avx2(&g, &h, miss, &mut avx2) };
                prop_assert_eq!(&lanes, &avx2);
            }
            for (j, &m) in lanes.iter().enumerate() {
                for (bit, (g, h)) in [(RIGHT, (g[j], h[j])), (LEFT, (g[j] + miss[0], h[j] + miss[1]))] {
                    let [ug, uh] = units;
                    let (gl, hl) = (g as f64 * ug, h as f64 * uh);
                    let (gr, hr) = ((s.total[0] - g) as f64 * ug, (s.total[1] - h) as f64 * uh);
                    let below = below_floor(gl * gl, hl + lambda, gr * gr, hr + lambda, s.floor, parent);
                    prop_assert_eq!(m & bit != 0, !below, "left ({}, {})", g, h);
                    // the test is sound: what it rules out is below the floor
                    let gain = gl * gl / (hl + lambda) + gr * gr / (hr + lambda) - parent;
                    prop_assert!(!below || gain < s.floor, "gain {} floor {}", gain, s.floor);
                }
            }
        }
    }
}
