//! [`Settings`]: model parameters and run options together, as the front ends take them by
//! name; each name goes to the one it belongs to.

use super::names::{canonical, Setting};
use super::{Checked, Params, RunOptions};
use crate::error::{Error, Result};

/// LightGBM objectives whose own parameter is spelled `alpha` (the quantile for `quantile`,
/// the point where `huber` turns linear), with the parameter it is here.
const LIGHTGBM_ALPHA: &[(&str, &str)] = &[("quantile", "quantile_alpha"), ("huber", "huber_slope")];

/// Model parameters and run options together, as the front ends take them by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    /// What defines the model.
    pub params: Params,
    /// How training runs.
    pub run: RunOptions,
    /// What the name `alpha` means depends on the objective's spelling: kept until both
    /// are known.
    alpha: AlphaReading,
}

/// The settings whose meaning depends on each other: `alpha` is XGBoost's L1 penalty, but
/// the quantile or Huber parameter where the objective has a LightGBM name (`quantile`,
/// `huber`), as LightGBM reads it.
#[derive(Debug, Clone, PartialEq, Default)]
struct AlphaReading {
    /// The objective as written, lower case.
    objective: Option<String>,
    /// The value given as the bare name `alpha`.
    bare: Option<String>,
    /// The L1 penalty given by an unambiguous name (`reg_alpha`, `lambda_l1`).
    l1: Option<String>,
    /// Whether the bare `alpha` came after the L1 penalty's other names (where `alpha` is
    /// the L1 penalty too, the later one holds).
    bare_is_latest: bool,
    /// The parameters given by their own names (`quantile_alpha`, `huber_slope`).
    own: Vec<&'static str>,
    /// What the parameters a bare `alpha` was written into held before: restored when a
    /// later setting changes its reading, so nothing else given (or continued from a model)
    /// is lost.
    undo: Option<Undo>,
}

/// The one parameter a bare `alpha` was written into, as it was before.
#[derive(Debug, Clone, PartialEq)]
enum Undo {
    /// The L1 penalty (XGBoost's reading).
    Alpha(f64),
    /// `quantile_alpha` (beside LightGBM's `quantile`).
    QuantileAlpha(Vec<f64>),
    /// `huber_slope` (beside LightGBM's `huber`).
    HuberSlope(f64),
}

impl Settings {
    /// Sets a model parameter or a run option by its name or alias.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        match canonical(key)? {
            Setting::Param("alpha") => {
                let bare = key.trim().replace('-', "_") == "alpha";
                if bare {
                    self.alpha.bare = Some(value.to_string());
                } else {
                    self.alpha.l1 = Some(value.to_string());
                }
                self.alpha.bare_is_latest = bare;
                self.read_alpha()
            }
            Setting::Param("objective") => {
                self.params.set_canonical("objective", value)?;
                self.alpha.objective = Some(value.to_ascii_lowercase());
                self.read_alpha()
            }
            Setting::Param(name) => {
                if LIGHTGBM_ALPHA.iter().any(|(_, p)| *p == name) {
                    // a bare alpha written into this parameter is refused now (both given)
                    self.alpha.own.push(name);
                    self.read_alpha()?;
                }
                self.params.set_canonical(name, value)
            }
            Setting::Run(_) => self.run.set(key, value),
        }
    }

    /// Applies a bare `alpha` as the objective's spelling says (see [`AlphaReading`]),
    /// first undoing what it was written into under an earlier reading; a bare `alpha`
    /// given beside the parameter it would stand for is refused, naming both.
    fn read_alpha(&mut self) -> Result<()> {
        match self.alpha.undo.take() {
            Some(Undo::Alpha(v)) => self.params.alpha = v,
            Some(Undo::QuantileAlpha(v)) => self.params.quantile_alpha = v,
            Some(Undo::HuberSlope(v)) => self.params.huber_slope = v,
            None => {}
        }
        let r = self.alpha.clone();
        let Some(v) = &r.bare else {
            return match &r.l1 {
                Some(l1) => self.params.set_canonical("alpha", l1),
                None => Ok(()),
            };
        };
        let lightgbm = r
            .objective
            .as_deref()
            .and_then(|o| LIGHTGBM_ALPHA.iter().find(|(name, _)| *name == o));
        match lightgbm {
            Some(&(objective, own)) => {
                if r.own.contains(&own) {
                    return Err(Error::param(
                        "alpha",
                        format!(
                            "`{v}` is ambiguous beside `{own}`: with objective `{objective}`, \
                             `alpha` is LightGBM's name for `{own}`; elsewhere it is XGBoost's \
                             L1 penalty (`reg_alpha`): give `{own}` or `reg_alpha` by name"
                        ),
                    ));
                }
                self.alpha.undo = Some(match own {
                    "quantile_alpha" => Undo::QuantileAlpha(self.params.quantile_alpha.clone()),
                    _ => Undo::HuberSlope(self.params.huber_slope),
                });
                self.params.set_canonical(own, v)?;
                if let Some(l1) = &r.l1 {
                    self.params.set_canonical("alpha", l1)?;
                }
                Ok(())
            }
            None => {
                self.alpha.undo = Some(Undo::Alpha(self.params.alpha));
                let l1 = if r.bare_is_latest {
                    Some(v)
                } else {
                    r.l1.as_ref()
                };
                self.params.set_canonical("alpha", l1.unwrap_or(v))
            }
        }
    }

    /// Checks both halves, once: training takes what this returns.
    pub fn checked(self) -> Result<CheckedSettings> {
        Ok(CheckedSettings {
            params: Checked::new(self.params)?,
            run: Checked::new(self.run)?,
        })
    }
}

/// Parameters and run options, each checked ([`Settings::checked`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedSettings {
    /// What defines the model.
    pub params: Checked<Params>,
    /// How the job runs.
    pub run: Checked<RunOptions>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::{CollectiveKind, CommCodec, Device};

    /// `alpha` means what the objective's spelling says: LightGBM's quantile (or Huber
    /// point) after `quantile` (or `huber`), XGBoost's L1 penalty otherwise, in any order.
    #[test]
    fn alpha_is_read_as_the_objectives_library_reads_it() {
        let of = |pairs: &[(&str, &str)]| {
            let mut s = Settings::default();
            for (k, v) in pairs {
                s.set(k, v)?;
            }
            Ok::<_, Error>(s.params)
        };
        for pairs in [
            [("objective", "quantile"), ("alpha", "0.9")],
            [("alpha", "0.9"), ("objective", "quantile")],
        ] {
            let p = of(&pairs).unwrap();
            assert_eq!((p.quantile_alpha.clone(), p.alpha), (vec![0.9], 0.0));
        }
        let p = of(&[("alpha", "2"), ("objective", "huber")]).unwrap();
        assert_eq!((p.huber_slope, p.alpha), (2.0, 0.0));
        // the L1 penalty by its unambiguous names, beside LightGBM's alpha
        let p = of(&[
            ("objective", "quantile"),
            ("alpha", "0.9"),
            ("reg_alpha", "3"),
        ])
        .unwrap();
        assert_eq!((p.quantile_alpha.clone(), p.alpha), (vec![0.9], 3.0));
        let p = of(&[
            ("lambda_l1", "3"),
            ("objective", "quantile"),
            ("alpha", "0.2"),
        ])
        .unwrap();
        assert_eq!((p.quantile_alpha.clone(), p.alpha), (vec![0.2], 3.0));
        // XGBoost's spellings: alpha is the L1 penalty, the latest name given winning
        let p = of(&[("objective", "reg:quantileerror"), ("alpha", "0.9")]).unwrap();
        assert_eq!((p.quantile_alpha.clone(), p.alpha), (vec![0.5], 0.9));
        for name in ["reg_alpha", "lambda_l1"] {
            assert_eq!(of(&[(name, "4")]).unwrap().alpha, 4.0);
            assert_eq!(
                of(&[("objective", "quantile"), (name, "4")]).unwrap().alpha,
                4.0
            );
        }
        let p = of(&[("alpha", "1"), ("reg_alpha", "2")]).unwrap();
        assert_eq!(p.alpha, 2.0);
        let p = of(&[("reg_alpha", "2"), ("alpha", "1")]).unwrap();
        assert_eq!(p.alpha, 1.0);
        // a later objective of XGBoost's spelling takes alpha back as the L1 penalty
        let p = of(&[
            ("objective", "quantile"),
            ("alpha", "0.9"),
            ("objective", "reg:quantileerror"),
        ])
        .unwrap();
        assert_eq!((p.quantile_alpha.clone(), p.alpha), (vec![0.5], 0.9));
        // what a model being continued holds is kept: only what a bare alpha wrote moves
        let mut s = Settings::default();
        s.params.quantile_alpha = vec![0.9];
        s.params.alpha = 2.0;
        s.set("objective", "reg:quantileerror").unwrap();
        assert_eq!(
            (s.params.quantile_alpha.clone(), s.params.alpha),
            (vec![0.9], 2.0)
        );
        s.set("objective", "quantile").unwrap();
        s.set("alpha", "0.3").unwrap();
        assert_eq!(
            (s.params.quantile_alpha.clone(), s.params.alpha),
            (vec![0.3], 2.0)
        );
        s.set("objective", "reg:quantileerror").unwrap();
        assert_eq!(
            (s.params.quantile_alpha.clone(), s.params.alpha),
            (vec![0.9], 0.3)
        );
        // a parameter given by its own name after a bare alpha keeps its value
        let p = of(&[
            ("alpha", "0.5"),
            ("quantile_alpha", "0.1"),
            ("objective", "reg:quantileerror"),
        ])
        .unwrap();
        assert_eq!((p.quantile_alpha.clone(), p.alpha), (vec![0.1], 0.5));
        let p = of(&[
            ("objective", "quantile"),
            ("alpha", "0.9"),
            ("huber_slope", "2"),
            ("reg_alpha", "1"),
        ])
        .unwrap();
        assert_eq!(
            (p.quantile_alpha.clone(), p.huber_slope, p.alpha),
            (vec![0.9], 2.0, 1.0)
        );
        // both readings at once: refused, naming both
        for pairs in [
            [
                ("objective", "quantile"),
                ("quantile_alpha", "0.5"),
                ("alpha", "0.9"),
            ],
            [
                ("alpha", "0.9"),
                ("quantile_alpha", "0.5"),
                ("objective", "quantile"),
            ],
        ] {
            let e = of(&pairs).unwrap_err().to_string();
            assert!(
                e.contains("`alpha`") && e.contains("quantile_alpha") && e.contains("L1"),
                "{e}"
            );
        }
    }

    #[test]
    fn settings_route_names_to_params_or_run_options() {
        let mut s = Settings::default();
        for (k, v) in [
            ("n_jobs", "3"),
            ("device", "wgpu"),
            ("workers", "2"),
            ("collective", "mpi"),
            ("comm_codec", "sparse"),
            ("comm_overlap", "false"),
            ("eta", "0.1"),
        ] {
            s.set(k, v).unwrap();
        }
        assert_eq!(
            s.run,
            RunOptions {
                threads: 3,
                device: Device::Wgpu,
                workers: 2,
                collective: CollectiveKind::Mpi,
                comm_codec: CommCodec::Sparse,
                comm_overlap: false,
                ..Default::default()
            }
        );
        assert_eq!(s.params.learning_rate, 0.1);
        assert_eq!(
            s.params,
            Params {
                learning_rate: 0.1,
                ..Default::default()
            }
        );
        let e = s.run.set("eta", "1").unwrap_err().to_string();
        assert!(
            e.contains("learning_rate") && e.contains("model parameter"),
            "{e}"
        );
        let e = s.set("worker", "1").unwrap_err().to_string();
        assert!(e.contains("workers"), "{e}");
        s.run.workers = 0;
        assert!(s.checked().unwrap_err().to_string().contains("workers"));
    }
}
