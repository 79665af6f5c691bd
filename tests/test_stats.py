"""labkit.stats: bootstrap intervals, the paired comparison, sample sizes and Cohen's kappa, checked
against hand-computed values and against scipy and scikit-learn."""

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats as scipy_stats
from scipy.stats import binom, multinomial
from sklearn.metrics import cohen_kappa_score

from labkit import UserError
from labkit.stats import (
    bootstrap_ci,
    cases_needed,
    cohen_kappa,
    compare,
    format_p,
    mcnemar_exact,
    mcnemar_power,
)

# ---------------------------------------------------------------- bootstrap intervals


@pytest.mark.parametrize(
    "values, confidence, low, high",
    [
        ([1, 1, 1, 1], 0.95, 1.0, 1.0),  # no spread: every resample is all successes
        ([0, 0, 0], 0.95, 0.0, 0.0),
        # n=3, one success: a resample's mean is k/3 with k ~ Binomial(3, 1/3), so P(0) = 8/27,
        # P(1/3) = 12/27, P(2/3) = 6/27, P(1) = 1/27: the 5th percentile is 0 (8/27 > 0.05) and the
        # 95th is 2/3 (the cumulative 26/27 first passes 0.95 there)
        ([0, 0, 1], 0.90, 0.0, 2 / 3),
    ],
    ids=["all pass", "all fail", "n=3 by hand"],
)
def test_bootstrap_interval_matches_the_hand_computed_resampling_distribution(
    values, confidence, low, high
):
    ci = bootstrap_ci(values, confidence)
    assert (ci.low, ci.high) == (pytest.approx(low), pytest.approx(high))
    assert ci.estimate == pytest.approx(sum(values) / len(values))


def test_the_spread_of_resampled_means_is_the_plug_in_standard_error():
    """The bootstrap variance of a mean is (plug-in variance) / n: sqrt(p(1-p)/n) for 0/1 cases;
    the middle 95% of a near-normal distribution spans about 2 * 1.96 of those."""
    values = [1] * 18 + [0] * 6
    ci = bootstrap_ci(values, resamples=20_000)
    se = math.sqrt(0.75 * 0.25 / 24)
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * se, rel=0.08)


def test_bootstrap_agrees_with_scipys_percentile_bootstrap():
    values = [1] * 18 + [0] * 6
    ours = bootstrap_ci(values)
    reference = scipy_stats.bootstrap(
        (np.array(values, dtype=float),),
        np.mean,
        n_resamples=10_000,
        method="percentile",
        random_state=np.random.default_rng(1),
    ).confidence_interval
    assert (ours.low, ours.high) == (
        pytest.approx(reference.low, abs=1 / 24),  # one case either way
        pytest.approx(reference.high, abs=1 / 24),
    )


def test_bootstrap_is_reproducible_by_its_seed():
    values = [1, 0, 1, 1, 0, 1, 1, 1, 0, 1]
    assert bootstrap_ci(values) == bootstrap_ci(values)
    assert bootstrap_ci(values, resamples=200, seed=1) != bootstrap_ci(
        values, resamples=200, seed=2
    )


def test_bootstrap_refuses_no_cases():
    with pytest.raises(UserError, match="non-empty list"):
        bootstrap_ci([])


# ---------------------------------------------------------------- the paired comparison


@pytest.mark.parametrize("worse, better", [(9, 1), (1, 4), (0, 0), (3, 3), (11, 1), (0, 6)])
def test_mcnemar_exact_is_a_two_sided_binomial_test_on_the_discordant_cases(worse, better):
    expected = (
        1.0 if worse + better == 0 else scipy_stats.binomtest(worse, worse + better, 0.5).pvalue
    )
    assert mcnemar_exact(worse, better) == pytest.approx(expected)


def test_mcnemar_by_hand():
    assert mcnemar_exact(9, 1) == 2 * (1 + 10) / 2**10  # 2 * P(X <= 1), X ~ Binomial(10, 1/2)


@pytest.mark.parametrize(
    "old, new, verdict",
    [
        ([1] * 12 + [0] * 12, [0] * 12 + [0] * 12, "worse"),  # 12 worse, none better: p = 2/4096
        ([1] * 18 + [0] * 6, [1] * 17 + [0] + [1] * 4 + [0] * 2, "too few cases to tell"),
        ([0] * 10 + [1] * 10, [1] * 20, "better"),
        ([1, 0, 1, 0], [1, 0, 1, 0], "too few cases to tell"),
    ],
    ids=["a large drop", "+12 points on 24 cases", "a large gain", "no change"],
)
def test_compare_says_when_the_cases_are_too_few_to_tell(old, new, verdict):
    assert compare(old, new).verdict == verdict


def test_compare_counts_the_cases_that_changed_and_pairs_the_bootstrap():
    c = compare([1, 1, 0, 0, 1], [1, 0, 1, 1, 1])
    assert (c.cases, c.worse, c.better) == (5, 1, 2)
    assert (c.old, c.new, c.difference.estimate) == (0.6, 0.8, pytest.approx(0.2))
    same = compare([1, 0, 1], [1, 0, 1])  # identical: every paired resample differs by 0
    assert (same.difference.low, same.difference.high, same.p_value) == (0, 0, 1.0)


def test_compare_refuses_different_case_counts():
    with pytest.raises(UserError, match="compare the same cases"):
        compare([1, 0], [1, 0, 1])


# ---------------------------------------------------------------- how many cases


@pytest.mark.parametrize(
    "old, new, discordant, expected",
    [
        # (1.95996 * sqrt(2 * .55 * .45) + 0.84162 * sqrt(.25 + .24))^2 / .1^2 = 387.3
        (0.5, 0.6, None, 388),
        # Connor's (1.95996 * sqrt(.2) + 0.84162 * sqrt(.2 - .01))^2 / .1^2 = 154.6 -> 155 cases,
        # where the exact test has power 0.762; 168 is the first n at or above 0.8
        (0.5, 0.6, 0.2, 168),
        # (1.95996 * sqrt(2 * .8125 * .1875) + 0.84162 * sqrt(.75 * .25 + .875 * .125))^2
        # / .125^2 = 151.9
        (0.75, 0.875, None, 152),
    ],
)
def test_cases_needed_by_hand(old, new, discordant, expected):
    assert cases_needed(old, new, discordant=discordant) == expected


def enumerated_power(n, old, new, discordant, alpha=0.05):
    """The reference: every (worse, better, same) split of n cases with its trinomial chance, the
    p-value from scipy's binomial distribution, summed where p < alpha."""
    better, worse = (discordant + new - old) / 2, (discordant - new + old) / 2
    w, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = w + b <= n
    w, b = w[keep], b[keep]
    chance = multinomial.pmf(np.stack([w, b, n - w - b], 1), n, [worse, better, 1 - discordant])
    p = np.minimum(1, 2 * binom.cdf(np.minimum(w, b), w + b, 0.5))
    p[w + b == 0] = 1.0
    return float(chance[p < alpha].sum())


@pytest.mark.parametrize(
    "n, old, new, discordant", [(10, 0.5, 0.8, 0.4), (40, 0.6, 0.7, 0.2), (155, 0.5, 0.6, 0.2)]
)
def test_mcnemar_power_equals_enumeration(n, old, new, discordant):
    assert mcnemar_power(n, old, new, discordant) == pytest.approx(
        enumerated_power(n, old, new, discordant), abs=1e-12
    )


SETTINGS = [  # (old, new, discordant, alpha, power): small and large effects, both directions
    (0.5, 0.6, 0.2, 0.05, 0.8),
    (0.5, 0.6, 0.1, 0.05, 0.8),
    (0.5, 0.6, 0.3, 0.05, 0.9),
    (0.7, 0.9, 0.25, 0.05, 0.8),
    (0.9, 0.7, 0.25, 0.05, 0.8),
    (0.2, 0.4, 0.3, 0.01, 0.8),
    (0.6, 0.75, 0.2, 0.05, 0.8),
    (0.75, 0.85, 0.15, 0.05, 0.8),
    (0.3, 0.5, 0.5, 0.05, 0.8),
    (0.4, 0.9, 0.5, 0.05, 0.95),
    (0.1, 0.3, 0.2, 0.10, 0.8),
    (0.8, 0.95, 0.2, 0.05, 0.9),
    (0.5, 0.7, 0.2, 0.05, 0.8),
    (0.5, 0.65, 0.35, 0.05, 0.8),
]


@pytest.mark.parametrize("old, new, discordant, alpha, power", SETTINGS)
def test_cases_needed_has_the_power_asked_for_by_exact_enumeration(
    old, new, discordant, alpha, power
):
    n = cases_needed(old, new, alpha, power, discordant)
    assert enumerated_power(n, old, new, discordant, alpha) >= power
    # the first such n from Connor's approximation up: it is Connor's, or one case fewer falls short
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    delta = new - old
    connor = math.ceil((za * discordant**0.5 + zb * (discordant - delta**2) ** 0.5) ** 2 / delta**2)
    assert n == connor or enumerated_power(n - 1, old, new, discordant, alpha) < power


def test_a_smaller_difference_needs_more_cases():
    assert cases_needed(0.75, 0.80) > cases_needed(0.75, 0.85) > cases_needed(0.75, 0.95)


@pytest.mark.parametrize(
    "old, new, discordant", [(0.5, 0.5, None), (1.2, 0.5, None), (0.5, 0.7, 0.1)]
)
def test_cases_needed_refuses_what_cannot_be(old, new, discordant):
    with pytest.raises(UserError):
        cases_needed(old, new, discordant=discordant)


# ---------------------------------------------------------------- Cohen's kappa

LABELS = [
    (["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"]),
    (["pass"] * 11 + ["fail"] * 9, ["pass"] * 11 + ["pass"] * 4 + ["fail"] * 5),
    (["pass", "fail", "none", "pass", "fail"], ["pass", "fail", "fail", "fail", "pass"]),
    (["a", "b", "c", "a", "b", "c"], ["a", "b", "c", "c", "b", "a"]),
]


def test_kappa_by_hand():
    """observed 3/4; chance = .5 * .25 + .5 * .75 = .5; kappa = (.75 - .5) / (1 - .5)."""
    assert cohen_kappa(*LABELS[0]) == pytest.approx(0.5)
    assert cohen_kappa(["pass", "fail"], ["pass", "fail"]) == 1.0


@pytest.mark.parametrize("first, second", LABELS)
def test_kappa_agrees_with_scikit_learn(first, second):
    assert cohen_kappa(first, second) == pytest.approx(cohen_kappa_score(first, second))


def test_kappa_is_undefined_when_both_raters_gave_one_label_throughout():
    assert math.isnan(cohen_kappa(["pass"] * 3, ["pass"] * 3))


# ---------------------------------------------------------------- p as shown


@pytest.mark.parametrize(
    "p, alpha, shown",
    [
        (0.375, 0.05, "0.375"),
        (0.03125, 0.03125, "0.03125"),  # equal: shown equal, not 0.031
        (0.03125, 0.0313, "0.031"),  # below: three decimals say so
        (0.0499999, 0.05, "0.0499999"),  # just below: 0.050 would read as not below
        (0.05, 0.05, "0.050"),
    ],
)
def test_p_is_shown_with_the_digits_its_comparison_needs(p, alpha, shown):
    assert format_p(p, alpha) == shown
    assert (float(shown) < alpha) == (p < alpha)
