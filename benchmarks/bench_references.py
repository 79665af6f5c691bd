"""Agreement with the references, every case (not a timing): ast_match beside BFCL's ast_checker
on all of BFCL's python categories and their mutations, in mode="bfcl" and by default (with
every difference listed by kind); quasi_exact_match beside GAIA's scorer on 20,000 pairs."""

import collections

from benchmarks import references


def main():
    if references.load_bfcl() is None:
        print("bfcl-eval is not installed: `make bench` installs it into .venv/bfcl-eval")
    else:
        for mode in ("bfcl", "labkit"):
            agree, total, differences, crashes = references.compare_bfcl(mode=mode)
            print(
                f"ast_match mode={mode!r}: {agree}/{total} agree ({agree / total:.3%}), "
                f"BFCL crashed on {len(crashes)}"
            )
            kinds = collections.Counter(
                ("parallel" if "parallel" in d[0] else "other", d[2], d[3].kind)
                for d in differences
            )
            for (where, reference, kind), n in kinds.most_common():
                print(f"  {n:6d}  {where}: BFCL {reference}, labkit {kind}")
    for mode in ("gaia", "labkit"):
        agree, total, differences = references.compare_gaia(20_000, mode=mode)
        print(f"quasi_exact_match mode={mode!r}: {agree}/{total} agree ({agree / total:.2%})")
