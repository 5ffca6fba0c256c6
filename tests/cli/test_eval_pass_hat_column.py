"""`rlvr eval`'s table shows pass^k beside pass@k (the records carry both for every k)."""

from __future__ import annotations

from types import SimpleNamespace

from rich.console import Console

from rlvr_cli.algo.passk import mean_pass_hat_k
from rlvr_cli.cli.evaluate import _table


def _record(step, counts, n=4, ks=(1, 2, 4)):
    from rlvr_cli.algo.passk import mean_pass_at_k

    return {"step": step, "label": "", "num_prompts": len(counts), "n": n, "maj_at_k": {},
            "pass_at_k": {str(k): mean_pass_at_k(counts, n, k) for k in ks},
            "pass_hat_k": {str(k): mean_pass_hat_k(counts, n, k) for k in ks},
            "greedy_accuracy": None, "len_mean": 10.0, "len_correct": 9.0, "len_incorrect": 11.0,
            "truncated_frac": 0.0}


def test_pass_hat_k_columns_beside_pass_at_k_with_hand_computed_values():
    # n = 4, counts c = (4, 2): pass^2 = (C(4,2) + C(2,2)) / (2 C(4,2)) = (6 + 1) / 12 = 0.583;
    # pass^4 = (1 + 0) / 2 = 0.5; pass@4 = 1.
    s = SimpleNamespace(n=4, temperature=1.0, seed=0, greedy=False, budget=None)
    table = _table([_record(0, [4, 2])], "m", "arithmetic", s, None)
    heads = [c.header for c in table.columns]
    assert heads[:6] == ["step", "pass@1", "pass@2", "pass@4", "pass^2", "pass^4"]
    con = Console(width=120, record=True)
    con.print(table)
    text = con.export_text()
    assert "0.583" in text and "0.500" in text and "0.750" in text  # pass^2, pass^4, pass@1 = 6/8


def test_records_without_pass_hat_k_show_no_pass_hat_column():
    rec = _record(0, [1, 3])
    del rec["pass_hat_k"]
    s = SimpleNamespace(n=4, temperature=1.0, seed=0, greedy=False, budget=None)
    assert not any(c.header.startswith("pass^") for c in _table([rec], "m", "t", s, None).columns)
