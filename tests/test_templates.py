"""rfabric.controllers.templates: the Phase 1 template key is exact on group membership."""

import numpy as np

from rfabric.controllers.base import Intent
from rfabric.controllers.templates import Decision, template_key


def intent(groups, stage="train"):
    return Intent(
        period=0,
        iteration=0,
        stage=stage,
        phase="fwd",
        primitive="all_to_all",
        ops=np.array([0]),
        groups=tuple(np.array(g, dtype=np.int64) for g in groups),
        src=np.zeros(0, np.int64),
        dst=np.zeros(0, np.int64),
        bytes=np.zeros(0, np.int64),
    )


def test_equal_groups_equal_key_and_membership_matters():
    a = template_key(intent([[0, 1, 2, 3], [4, 5]]))
    assert a == template_key(intent([[0, 1, 2, 3], [4, 5]]))
    # same sizes, other members; same members, other split; other stage
    assert a != template_key(intent([[0, 1, 2, 4], [3, 5]]))
    assert a != template_key(intent([[0, 1, 2], [3, 4, 5]]))
    assert a != template_key(intent([[0, 1, 2, 3], [4, 5]], stage="gen"))
    assert template_key(intent([])) == template_key(intent([]))


def test_decision_is_a_plain_record():
    d = Decision(3, "train", "commit", 12, "why")
    assert (d.period, d.stage, d.action, d.circuits, d.detail) == (3, "train", "commit", 12, "why")
