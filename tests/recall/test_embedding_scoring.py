"""The optional "embedding" part of recall's scoring (pure): absent by default, labelled when present."""

from __future__ import annotations

from dataclasses import replace

from schemas.recall_scoring import EMBEDDING_WEIGHT, WEIGHTS, Candidate, Rarity, explained, pick, score, total
from schemas.recall_vectors import Embedding, cosine

from .test_scoring import COMMON, HOUR, OOM, REFUSED, profile

MODEL = "standin-hashed-words"
RARITY = Rarity(100, {OOM: 3, REFUSED: 20, COMMON: 90, "reason:OOMKilling": 4, "reason:BackOff": 30})


def case() -> tuple[Candidate, list[Candidate]]:
    """test_scoring's look-alike case: the query, the true match, the look-alike."""
    query = profile(
        "q", patterns={OOM: 198, COMMON: 50}, errors=(OOM,), reasons={"OOMKilling": 3}, opened=100 * HOUR
    )
    true = profile("true", service="payments-api", alert="ContainerRestarts", patterns={OOM: 212, COMMON: 9},
                   errors=(OOM,), reasons={"OOMKilling": 2}, decisions=("rolled back to 3.13.2",))  # fmt: skip
    alike = profile("alike", patterns={REFUSED: 300, COMMON: 40}, errors=(REFUSED,), reasons={"BackOff": 4})
    return query, [alike, true]


def vec(*xs: float) -> Embedding:
    return Embedding(MODEL, tuple(xs))


def test_without_vectors_the_parts_scores_and_reasons_are_the_five_of_before() -> None:
    query, candidates = case()
    hits = explained(query, pick(query, candidates, RARITY), RARITY)
    # pinned from main before the part existed (the same case, scored by main's schemas/recall_scoring.py)
    assert [(h.thread_ts, h.score, h.reasons) for h in hits] == [
        ("true", 0.67, ("same namespace", f"1 of 1 error patterns shared (`{OOM}` x198 here, x212 there)",
                        "2 of 2 log patterns shared", "pod events: OOMKilling x2",
                        "resolved by: rolled back to 3.13.2")),
        ("alike", 0.1928, ("same alertname, service, namespace", "1 of 2 log patterns shared")),
    ]  # fmt: skip
    assert all(set(h.parts) == set(WEIGHTS) for h in hits)
    # one vector alone (the query's, or a candidate's) adds nothing either: the part needs both
    with_q = replace(query, embedding=vec(1.0, 0.0))
    assert "embedding" not in score(with_q, candidates[1], RARITY)
    assert "embedding" not in score(query, replace(candidates[1], embedding=vec(1.0, 0.0)), RARITY)


def test_with_both_vectors_the_part_is_added_with_its_weight_and_a_labelled_reason() -> None:
    query, (alike, true) = case()
    query = replace(query, embedding=vec(1.0, 0.0, 0.0))
    alike = replace(alike, embedding=vec(0.0, 1.0, 0.0))
    true = replace(true, embedding=vec(0.8, 0.6, 0.0))
    before = {h.thread_ts: h.score for h in explained(*case()[:1], pick(*case(), RARITY), RARITY)}
    hits = explained(query, pick(query, [alike, true], RARITY), RARITY)
    got = {h.thread_ts: h for h in hits}
    assert got["true"].parts["embedding"] == 0.8 and got["alike"].parts["embedding"] == 0.0
    assert got["true"].score == round(before["true"] + EMBEDDING_WEIGHT * 0.8, 4)
    assert got["alike"].score == before["alike"]
    assert f"discussion alike by embeddings ({MODEL}, 0.80)" in got["true"].reasons
    assert total(got["true"].parts) == got["true"].score


def test_cosine_compares_only_vectors_of_one_model_and_length() -> None:
    assert cosine(vec(1.0, 1.0), vec(1.0, 1.0)) == 1.0
    assert cosine(vec(1.0, 0.0), vec(-1.0, 0.0)) == 0.0  # opposite is not alike: clamped
    assert cosine(vec(1.0, 0.0), Embedding("other-model", (1.0, 0.0))) is None
    assert cosine(vec(1.0, 0.0), vec(1.0, 0.0, 0.0)) is None
    assert cosine(vec(0.0, 0.0), vec(1.0, 0.0)) is None
    assert cosine(None, vec(1.0)) is None
