//! A small Gaussian-process surrogate for the `auto` strategy's model-based technique.
//!
//! Points are encoded as value indices scaled to [0, 1] per dimension (ordinal, whatever
//! the spacing of the values), costs as standardized log-times (speed-ups multiply). The
//! kernel is Matérn 5/2 with one length scale per dimension; the length scales and the
//! noise level are chosen by marginal likelihood over a small grid, each dimension in
//! turn. Proposals maximize expected improvement. Fits are capped at [`MAX_POINTS`]
//! observations (the best, and a spread over the rest) and the hyperparameters are chosen
//! again only as the data grows, so a proposal stays in the milliseconds.

/// Observations a fit uses at most.
pub const MAX_POINTS: usize = 64;

const LENGTHS: [f64; 6] = [0.08, 0.15, 0.3, 0.6, 1.2, 3.0];
const NOISES: [f64; 3] = [1e-4, 1e-3, 1e-2];

pub struct Gp {
    xs: Vec<Vec<f64>>,
    lengths: Vec<f64>,
    noise: f64,
    /// Lower-triangular Cholesky factor of K + noise·I, row-major.
    chol: Vec<f64>,
    alpha: Vec<f64>,
    mean: f64,
    scale: f64,
}

fn matern52(a: &[f64], b: &[f64], lengths: &[f64]) -> f64 {
    let r2: f64 = a.iter().zip(b).zip(lengths).map(|((x, y), l)| ((x - y) / l).powi(2)).sum();
    let r = (5.0 * r2).sqrt();
    (1.0 + r + r * r / 3.0) * (-r).exp()
}

/// Cholesky factor of a symmetric positive-definite matrix, or `None`.
fn cholesky(k: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let mut s = k[i * n + j];
            for p in 0..j {
                s -= l[i * n + p] * l[j * n + p];
            }
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * n + i] = s.sqrt();
            } else {
                l[i * n + j] = s / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Solve L·x = b (forward) then Lᵀ·y = x (backward).
fn solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = b.to_vec();
    for i in 0..n {
        for p in 0..i {
            x[i] -= l[i * n + p] * x[p];
        }
        x[i] /= l[i * n + i];
    }
    for i in (0..n).rev() {
        for p in i + 1..n {
            x[i] -= l[p * n + i] * x[p];
        }
        x[i] /= l[i * n + i];
    }
    x
}

fn forward(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut x = b.to_vec();
    for i in 0..n {
        for p in 0..i {
            x[i] -= l[i * n + p] * x[p];
        }
        x[i] /= l[i * n + i];
    }
    x
}

/// Negative log marginal likelihood (up to a constant) and the factor it came from.
fn evidence(xs: &[Vec<f64>], ys: &[f64], lengths: &[f64], noise: f64) -> Option<(f64, Vec<f64>, Vec<f64>)> {
    let n = xs.len();
    let mut k = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let v = matern52(&xs[i], &xs[j], lengths);
            k[i * n + j] = v;
            k[j * n + i] = v;
        }
        k[i * n + i] += noise;
    }
    let l = cholesky(&k, n)?;
    let alpha = solve(&l, n, ys);
    let fit: f64 = ys.iter().zip(&alpha).map(|(y, a)| y * a).sum::<f64>() / 2.0;
    let complexity: f64 = (0..n).map(|i| l[i * n + i].ln()).sum();
    Some((fit + complexity, l, alpha))
}

/// Length scale per dimension and noise level of a fit.
#[derive(Debug, Clone, PartialEq)]
pub struct Hyper {
    pub lengths: Vec<f64>,
    pub noise: f64,
}

impl Gp {
    /// Fit to points in [0, 1]^d and their costs (positive times). With `hyper`, those
    /// length scales and noise are used as they are (one factorization); without, they
    /// are chosen by marginal likelihood (a few dozen). [`Gp::hyper`] gives them back.
    pub fn fit(xs: Vec<Vec<f64>>, costs: &[f64], hyper: Option<&Hyper>) -> Option<Gp> {
        let n = xs.len();
        if n < 2 {
            return None;
        }
        let dims = xs[0].len();
        let logs: Vec<f64> = costs.iter().map(|c| c.max(1e-12).ln()).collect();
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / n as f64;
        let scale = var.sqrt().max(1e-9);
        let ys: Vec<f64> = logs.iter().map(|y| (y - mean) / scale).collect();

        let (lengths, noise) = match hyper {
            Some(h) if h.lengths.len() == dims => (h.lengths.clone(), h.noise),
            _ => select(&xs, &ys, dims)?,
        };
        let (_, chol, alpha) = evidence(&xs, &ys, &lengths, noise)?;
        Some(Gp { xs, lengths, noise, chol, alpha, mean, scale })
    }

    pub fn hyper(&self) -> Hyper {
        Hyper { lengths: self.lengths.clone(), noise: self.noise }
    }

    /// Predicted mean and standard deviation of the standardized log-cost at `x`.
    pub fn predict(&self, x: &[f64]) -> (f64, f64) {
        let n = self.xs.len();
        let k: Vec<f64> = self.xs.iter().map(|xi| matern52(xi, x, &self.lengths)).collect();
        let mu: f64 = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward(&self.chol, n, &k);
        let var = (1.0 - v.iter().map(|x| x * x).sum::<f64>()).max(1e-12);
        (mu, var.sqrt())
    }

    /// A cost, standardized the way the model sees costs.
    pub fn standardize(&self, cost: f64) -> f64 {
        (cost.max(1e-12).ln() - self.mean) / self.scale
    }

    /// A cost back from the model's standardized log scale.
    pub fn destandardize(&self, y: f64) -> f64 {
        (y * self.scale + self.mean).exp()
    }

    /// Expected improvement below `best` (a standardized log-cost) at `x`.
    pub fn expected_improvement(&self, x: &[f64], best: f64) -> f64 {
        let (mu, sigma) = self.predict(x);
        let gap = best - mu - 0.01;
        let z = gap / sigma;
        gap * normal_cdf(z) + sigma * normal_pdf(z)
    }
}

/// Coordinate search over the grid: a shared length scale first, then each dimension's
/// own, then the noise.
fn select(xs: &[Vec<f64>], ys: &[f64], dims: usize) -> Option<(Vec<f64>, f64)> {
    let mut lengths = vec![0.3; dims];
    let mut noise = 1e-3;
    let mut best = evidence(xs, ys, &lengths, noise)?.0;
    let mut consider = |lengths_trial: Vec<f64>, noise_trial: f64, lengths: &mut Vec<f64>, noise: &mut f64| {
        if let Some((e, _, _)) = evidence(xs, ys, &lengths_trial, noise_trial)
            && e < best
        {
            best = e;
            *lengths = lengths_trial;
            *noise = noise_trial;
        }
    };
    for &l in &LENGTHS {
        consider(vec![l; dims], noise, &mut lengths, &mut noise);
    }
    for d in 0..dims {
        for &l in &LENGTHS {
            let mut trial = lengths.clone();
            trial[d] = l;
            consider(trial, noise, &mut lengths, &mut noise);
        }
    }
    for &s in &NOISES {
        consider(lengths.clone(), s, &mut lengths, &mut noise);
    }
    Some((lengths, noise))
}

fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

fn normal_cdf(z: f64) -> f64 {
    0.5 * (1.0 + erf(z / std::f64::consts::SQRT_2))
}

/// Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7).
fn erf(x: f64) -> f64 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let y = 1.0 - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t + 0.254_829_592) * t * (-x * x).exp();
    sign * y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_interpolates_and_is_unsure_far_away() {
        let xs: Vec<Vec<f64>> = (0..8).map(|i| vec![i as f64 / 7.0]).collect();
        let costs: Vec<f64> = xs.iter().map(|x| 1.0 + (x[0] - 0.5).powi(2) * 4.0).collect();
        let gp = Gp::fit(xs.clone(), &costs, None).unwrap();
        for (x, c) in xs.iter().zip(&costs) {
            let (mu, _) = gp.predict(x);
            assert!((mu - gp.standardize(*c)).abs() < 0.1, "at {x:?}: {mu} vs {}", gp.standardize(*c));
        }
        let (_, near) = gp.predict(&[0.5]);
        let (_, far) = gp.predict(&[3.0]);
        assert!(far > near * 3.0, "σ near {near}, far {far}");
    }

    #[test]
    fn expected_improvement_points_at_the_valley() {
        let xs: Vec<Vec<f64>> = [0.0, 0.2, 0.4, 0.8, 1.0].iter().map(|&x| vec![x]).collect();
        let costs: Vec<f64> = xs.iter().map(|x| 1.0 + (x[0] - 0.6).powi(2) * 10.0).collect();
        let gp = Gp::fit(xs, &costs, None).unwrap();
        let best = gp.standardize(costs.iter().copied().fold(f64::INFINITY, f64::min));
        let ei = |x: f64| gp.expected_improvement(&[x], best);
        assert!(ei(0.6) > ei(0.05) && ei(0.6) > ei(0.95), "{} {} {}", ei(0.6), ei(0.05), ei(0.95));
    }

    #[test]
    fn erf_matches_known_values() {
        assert!((erf(0.5) - 0.520_499_877_8).abs() < 2e-7);
        assert!((erf(-1.0) + 0.842_700_792_9).abs() < 2e-7);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
    }
}
