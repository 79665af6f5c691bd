"""Statistics that decide: is a difference between two agent versions real, or chance?

Built in 10_evals (with labkit.evals). `bootstrap_ci` resamples cases (seeded, so the same data
always gives the same interval); `compare` pairs two versions on the same cases: the difference,
its paired bootstrap interval, and McNemar's exact test on the cases where they disagree, with a
verdict that says "too few cases to tell" when that is the truth. `cases_needed` says how many
cases a difference of a given size needs; `cohen_kappa` is agreement beyond chance (judges).
Left out, and what production uses: BCa intervals, multiple-comparison corrections, sequential
testing, clustered cases (scipy.stats, statsmodels).
"""

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .errors import UserError

VERDICTS = ("better", "worse", "too few cases to tell")


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    confidence: float = 0.95

    def __str__(self):
        return f"{self.estimate:.0%} [{self.low:.0%}, {self.high:.0%}]"


def _outcomes(values, name="values") -> np.ndarray:
    """Per-case outcomes as floats (True/False count as 1/0); refuses an empty list."""
    values = np.asarray(list(values), dtype=float)
    if values.ndim != 1 or len(values) == 0:
        raise UserError(f"{name} must be a non-empty list of per-case numbers, e.g. [1, 0, 1]")
    return values


def bootstrap_ci(
    values: Iterable[float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> Interval:
    """The mean of per-case values with a percentile bootstrap interval (seeded: reproducible).

    Resample the cases with replacement `resamples` times; the interval holds the middle
    `confidence` share of the resampled means.
    Example: str(bootstrap_ci([1, 1, 0, 1]))  ->  "75% [25%, 100%]"
    """
    values = _outcomes(values)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[picks].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(values.mean()), float(low), float(high), confidence)


def mcnemar_exact(worse: int, better: int) -> float:
    """Two-sided exact McNemar p-value from the discordant cases alone.

    Under "no difference" each discordant case is a fair coin: worse ~ Binomial(worse + better,
    1/2). The p-value is the chance of a split at least this uneven.
    Example: mcnemar_exact(9, 1)  ->  0.0215   (2 * P(X <= 1) for X ~ Binomial(10, 1/2))
    """
    n = worse + better
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(worse, better) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class Comparison:
    cases: int
    old: float  # success rate of the old version
    new: float
    difference: Interval  # new - old, paired bootstrap
    worse: int  # cases the old version passed and the new one failed
    better: int  # cases the new version passed and the old one failed
    p_value: float  # McNemar exact, two-sided
    alpha: float
    verdict: str  # one of VERDICTS

    def __str__(self):
        d = self.difference
        return (
            f"{self.cases} cases: {self.old:.0%} -> {self.new:.0%}, difference {d.estimate:+.0%} "
            f"(95% CI {d.low:+.0%} to {d.high:+.0%}); {self.worse} worse, {self.better} better, "
            f"McNemar p = {format_p(self.p_value, self.alpha)}: {self.verdict}"
        )


def compare(
    old: Iterable[float],
    new: Iterable[float],
    alpha: float = 0.05,
    resamples: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Compare two versions' per-case success on the SAME cases, in the same order.

    Only the cases where they disagree carry information (a case both pass or both fail says
    nothing about which is better), so the test is McNemar's on those. The verdict is "better" or
    "worse" when p < alpha, else "too few cases to tell".
    Example: compare([1, 1, 1, 0], [1, 1, 0, 0]).verdict  ->  "too few cases to tell"
    """
    old, new = _outcomes(old, "old"), _outcomes(new, "new")
    if len(old) != len(new):
        raise UserError(
            f"old has {len(old)} cases and new has {len(new)} — compare the same cases, in order"
        )
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(old), size=(resamples, len(old)))
    diffs = (new - old)[picks].mean(axis=1)  # one resample keeps each case's pair together
    low, high = np.percentile(diffs, [2.5, 97.5])
    worse, better = int((old > new).sum()), int((new > old).sum())
    p = mcnemar_exact(worse, better)
    verdict = VERDICTS[2] if p >= alpha else VERDICTS[0] if better > worse else VERDICTS[1]
    d = Interval(float((new - old).mean()), float(low), float(high))
    return Comparison(
        len(old), float(old.mean()), float(new.mean()), d, worse, better, p, alpha, verdict
    )


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def format_p(p: float, alpha: float) -> str:
    """p with three decimals, or as many more as it takes for the shown p to compare with alpha
    the way the p itself does (a p just under alpha never reads as alpha or above).

    Example: format_p(0.375, 0.05)  ->  "0.375";  format_p(0.03125, 0.031)  ->  "0.03125"
    """
    for digits in range(3, 18):
        shown = f"{p:.{digits}f}"
        if (float(shown) < alpha) == (p < alpha) and (float(shown) == alpha) == (p == alpha):
            return shown
    return repr(p)


def _rejections(most: int, share: float, alpha: float) -> np.ndarray:
    """For k = 0..most discordant cases, the chance McNemar's exact p < alpha when each one is
    on the better side with chance `share`: 1 - the chance of a split inside the accept region.

    subtle: a split more than 12 standard deviations from k/2 has probability below 1e-30, so
    each k sums only the terms within that window (exact to floating point, and fast at large k).
    """
    logfact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, most + 1)))])
    with np.errstate(divide="ignore"):
        log_p, log_q = np.log(share), np.log1p(-share)
    reject = np.zeros(most + 1)
    for k in range(1, most + 1):
        j = np.arange(max(0, int(k / 2 - 6 * math.sqrt(k)) - 1), k // 2 + 1)
        log_comb = logfact[k] - logfact[j] - logfact[k - j]
        tail = 2 * np.cumsum(np.exp(log_comb - k * math.log(2)))  # p-value of split j
        low = j[0] + int(np.searchsorted(tail >= alpha, True))  # splits below low reject
        if low == 0:
            continue
        j = np.arange(low, k - low + 1)
        log_comb = logfact[k] - logfact[j] - logfact[k - j]
        with np.errstate(invalid="ignore"):  # share 1: 0 * -inf
            accept = np.exp(log_comb + np.nan_to_num(j * log_p) + np.nan_to_num((k - j) * log_q))
        reject[k] = max(0.0, 1 - accept.sum())
    return reject


def _discordant_counts(n: int, discordant: float) -> np.ndarray:
    """Binomial(n, discordant) probabilities of 0..n discordant cases."""
    j = np.arange(n + 1)
    logfact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.nan_to_num(j * np.log(discordant)) + np.nan_to_num(
            (n - j) * np.log1p(-discordant)
        )
    return np.exp(logfact[n] - logfact[j] - logfact[n - j] + terms)


def mcnemar_power(n: int, old: float, new: float, discordant: float, alpha: float = 0.05) -> float:
    """Exact power of compare's test on n paired cases: the chance McNemar's p < alpha, summed
    over every count of discordant cases and every split of them (enumeration, no approximation).

    Example: round(mcnemar_power(155, 0.5, 0.6, discordant=0.2), 3)  ->  0.762
    """
    share = (discordant + abs(new - old)) / 2 / discordant
    return float(_discordant_counts(n, discordant) @ _rejections(n, share, alpha))


def cases_needed(
    old: float, new: float, alpha: float = 0.05, power: float = 0.8, discordant: float | None = None
) -> int:
    """Cases needed to detect success `old` -> `new` (two-sided `alpha`, with `power`).

    Without `discordant`: two independent sets of cases, the normal approximation for two
    proportions (the number per version). With `discordant`, the expected share of cases the two
    versions disagree on: the same cases run by both (paired), and the count is exact for the
    test compare runs: from Connor's normal approximation up to the first n whose McNemar exact
    test has at least `power` (enumerated; Connor's n alone falls short, the exact test is
    conservative).
    Example: cases_needed(0.5, 0.6)  ->  388      cases_needed(0.5, 0.6, discordant=0.2)  ->  168
    """
    delta = new - old
    if not (0 <= old <= 1 and 0 <= new <= 1) or delta == 0:
        raise UserError(f"old={old} and new={new} must be two different rates between 0 and 1")
    za, zb = _z(1 - alpha / 2), _z(power)
    if discordant is None:
        mean = (old + new) / 2
        spread = za * math.sqrt(2 * mean * (1 - mean))
        n = (spread + zb * math.sqrt(old * (1 - old) + new * (1 - new))) ** 2 / delta**2
        return math.ceil(n)
    if not abs(delta) <= discordant <= 1:
        raise UserError(f"discordant={discordant} must be between |new - old| and 1")
    n = (za * math.sqrt(discordant) + zb * math.sqrt(discordant - delta**2)) ** 2 / delta**2
    n, share = math.ceil(n), (discordant + abs(delta)) / 2 / discordant
    reject = _rejections(2 * n, share, alpha)
    while float(_discordant_counts(n, discordant) @ reject[: n + 1]) < power:
        n += 1
        if n >= len(reject):
            reject = _rejections(2 * n, share, alpha)
    return n


def cohen_kappa(first: Iterable[Hashable], second: Iterable[Hashable]) -> float:
    """Cohen's kappa: agreement between two raters beyond what their label rates give by chance.

    kappa = (observed - expected) / (1 - expected), where expected = sum over labels of the
    product of both raters' shares of that label. 1 is perfect, 0 is chance, below 0 is worse;
    undefined (nan) when both raters gave one and the same label to every case.
    Example: cohen_kappa(["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"])
             ->  0.5
    """
    first, second = list(first), list(second)
    if len(first) != len(second) or not first:
        raise UserError("cohen_kappa needs two equally long, non-empty lists of labels")
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    labels = set(first) | set(second)
    expected = sum((first.count(x) / n) * (second.count(x) / n) for x in labels)
    if expected == 1:  # both used one and the same label throughout: chance explains it all
        return math.nan
    return (observed - expected) / (1 - expected)
