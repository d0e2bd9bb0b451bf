//! SystemDS's distribution functions (`cdf`, `icdf`, `pnorm`, `qnorm`, `pt`, `qt`, `pf`, `qf`,
//! `pchisq`, `qchisq`, `pexp`, `qexp`) on scalars, through `statrs`, with SystemDS's rules: a
//! normal's `sd` and an exponential's `rate` must be positive, degrees of freedom are truncated
//! to integers (`UtilFunctions.parseToInt`) and must be positive, the upper tail is
//! `1 - cdf` (as SystemDS computes it), and a probability outside [0, 1] is an error.

use crate::error::{Result, RuntimeError};
use lafuse_core::StatOp;
use statrs::distribution::{ChiSquared, ContinuousCDF, Exp, FisherSnedecor, Normal, StudentsT};

fn argument(
    function: &'static str,
    argument: &'static str,
    expected: &'static str,
    found: f64,
) -> RuntimeError {
    RuntimeError::StatArgument {
        function,
        argument,
        expected,
        found,
    }
}

/// Parameters the distribution refuses (the checks above leave none: a last line of defence).
fn invalid(function: &'static str) -> RuntimeError {
    argument(
        function,
        "parameters",
        "those of a valid distribution",
        f64::NAN,
    )
}

/// Degrees of freedom as SystemDS reads them: truncated toward zero, at least 1.
fn degrees(function: &'static str, name: &'static str, v: f64) -> Result<f64> {
    let d = v.signum() * (v.abs() + 1e-10).floor();
    if d.is_nan() || d <= 0.0 {
        return Err(argument(function, name, "positive degrees of freedom", v));
    }
    Ok(d)
}

/// `p(x)` or `q(p)` of the distribution `op` names; `inputs` in [`StatOp`]'s order.
pub fn distribution(op: StatOp, inputs: &[f64]) -> Result<f64> {
    use StatOp::*;
    let name = op.name();
    let at = |i: usize| inputs.get(i).copied().unwrap_or(f64::NAN);
    let x = at(0);
    let dist: Box<dyn ContinuousCDF<f64, f64>> = match op {
        NormalCdf | NormalQuantile => {
            let sd = at(2);
            if sd.is_nan() || sd <= 0.0 {
                return Err(argument(name, "sd", "a positive standard deviation", sd));
            }
            Box::new(Normal::new(at(1), sd).map_err(|_| invalid(name))?)
        }
        ExpCdf | ExpQuantile => {
            let rate = at(1);
            if rate.is_nan() || rate <= 0.0 {
                return Err(argument(name, "rate", "a positive rate", rate));
            }
            Box::new(Exp::new(rate).map_err(|_| invalid(name))?)
        }
        ChisqCdf | ChisqQuantile => {
            Box::new(ChiSquared::new(degrees(name, "df", at(1))?).map_err(|_| invalid(name))?)
        }
        TCdf | TQuantile => Box::new(
            StudentsT::new(0.0, 1.0, degrees(name, "df", at(1))?).map_err(|_| invalid(name))?,
        ),
        FCdf | FQuantile => Box::new(
            FisherSnedecor::new(degrees(name, "df1", at(1))?, degrees(name, "df2", at(2))?)
                .map_err(|_| invalid(name))?,
        ),
        _ => return Err(argument(name, "op", "a distribution function", f64::NAN)),
    };
    let quantile = matches!(
        op,
        NormalQuantile | ExpQuantile | ChisqQuantile | FQuantile | TQuantile
    );
    if quantile {
        if !(0.0..=1.0).contains(&x) {
            return Err(argument(name, "target", "a probability in [0, 1]", x));
        }
        return Ok(dist.inverse_cdf(x));
    }
    // Commons Math's F distribution takes the regularized beta at d1 x / (d2 + d1 x), which
    // is Inf / Inf at x = +Inf: SystemDS's `pf` of an infinite statistic is NaN (either tail).
    if x.is_nan() || (x == f64::INFINITY && op == FCdf) {
        return Ok(f64::NAN);
    }
    let lower = at(op.arity() - 1) != 0.0;
    let p = dist.cdf(x);
    Ok(if lower { p } else { 1.0 - p })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
    }

    /// Values printed by SystemDS 3.4 (`print(pnorm(target=1.5))`, ... run with
    /// `../shared/tools/systemds`).
    #[test]
    fn values_match_systemds() {
        use StatOp::*;
        let cases: &[(StatOp, &[f64], f64)] = &[
            (NormalCdf, &[1.5, 0.0, 1.0, 1.0], 0.9331927987311419),
            (NormalCdf, &[1.5, 0.0, 1.0, 0.0], 0.06680720126885809),
            (NormalCdf, &[1.5, 1.0, 2.0, 1.0], 0.5987063256829237),
            (NormalQuantile, &[0.975, 0.0, 1.0], 1.959963984540054),
            (ChisqCdf, &[3.0, 2.0, 1.0], 0.7768698398515697),
            (ChisqQuantile, &[0.3, 4.0], 2.194698421136678),
            (ChisqQuantile, &[0.5, 20.0], 19.33742922942548),
            (TCdf, &[2.0, 10.0, 1.0], 0.9633059826146299),
            (TQuantile, &[0.9, 5.0], 1.4758840483818514),
            (FCdf, &[2.0, 3.0, 7.0, 0.0], 0.20269364248665123),
            (FCdf, &[f64::INFINITY, 1.0, 38.0, 0.0], f64::NAN),
            (FCdf, &[f64::INFINITY, 1.0, 38.0, 1.0], f64::NAN),
            (FQuantile, &[0.5, 20.0, 30.0], 0.9887690341754584),
        ];
        // SystemDS 3.4 prints `qt(target=0.5, df=10)` as 0.0 and fails on `pexp` (a
        // NullPointerException): the median of t is 0, and the exponential's is checked by
        // its definition instead.
        assert_eq!(distribution(TQuantile, &[0.5, 10.0]).unwrap(), 0.0);
        let e = distribution(ExpCdf, &[2.0, 0.5, 1.0]).unwrap();
        assert!(close(e, 1.0 - (-1.0f64).exp()), "{e}");
        for &(op, ins, want) in cases {
            let got = distribution(op, ins).unwrap();
            assert!(
                close(got, want) || (got.is_nan() && want.is_nan()),
                "{op:?}{ins:?}: {got} != {want}"
            );
        }
    }

    #[test]
    fn bad_parameters_are_errors_naming_them() {
        let e = distribution(StatOp::NormalCdf, &[1.0, 0.0, 0.0, 1.0]).unwrap_err();
        assert!(e.to_string().contains("sd"), "{e}");
        let e = distribution(StatOp::ChisqCdf, &[1.0, 0.4, 1.0]).unwrap_err();
        assert!(e.to_string().contains("df"), "{e}");
        let e = distribution(StatOp::NormalQuantile, &[1.5, 0.0, 1.0]).unwrap_err();
        assert!(e.to_string().contains("target"), "{e}");
        // Degrees of freedom truncate, as SystemDS parses them.
        assert_eq!(
            distribution(StatOp::ChisqCdf, &[3.0, 2.7, 1.0]).unwrap(),
            distribution(StatOp::ChisqCdf, &[3.0, 2.0, 1.0]).unwrap()
        );
    }
}
