"""Make-experience stage: the forward-only passes between generation and training.

After the samples arrive and before the first optimizer step, RL frameworks run forward
passes over the whole batch: the reward model's score (if a model-based reward is used),
the actor's log-probs under the rollout weights ("old" log-probs, recomputed by the
trainer), the reference policy's log-probs (KL term) and, for PPO, the critic's values.
veRL's ``RayPPOTrainer.fit`` runs them in that order (``compute_rm_score``,
``compute_log_prob``, ``compute_ref_log_prob``, ``compute_values``), each model colocated
with the actor and in its parallel layout. Each pass is a forward-only pipeline
(`training.forward_pass`) with stage ``experience`` and the pass name as phase.
"""

from __future__ import annotations

import numpy as np

from .context import RLContext
from .training import Pass, forward_pass

__all__ = ["emit_experience", "experience_passes", "PASSES", "RL_ALGORITHMS"]

#: The forward passes by phase name. The critic's value head and the reward model's
#: score head (h x 1) replace the LM head: their compute is left out.
PASSES = {
    "reward": Pass("experience", "reward", backward=False, lm_head=False),
    "old_logprob": Pass("experience", "old_logprob", backward=False),
    "ref_logprob": Pass("experience", "ref_logprob", backward=False),
    "critic_value": Pass("experience", "critic_value", backward=False, lm_head=False),
}

#: Passes per RL algorithm (GRPO: no critic; PPO: critic values for GAE); ``none``: no
#: make-experience pass (the trainer reuses the rollout's log-probs, no KL term).
RL_ALGORITHMS = {
    "grpo": ("old_logprob", "ref_logprob"),
    "ppo": ("old_logprob", "ref_logprob", "critic_value"),
    "none": (),
}


def experience_passes(algorithm: str, reward_model: bool) -> tuple[str, ...]:
    """The pass names, in veRL's order, of ``algorithm`` with or without a reward model."""
    return (("reward",) if reward_model else ()) + RL_ALGORITHMS[algorithm]


def emit_experience(ctx: RLContext, it: int, lengths: np.ndarray) -> None:
    """Emit the make-experience passes of iteration ``it`` (``ctx.experience``)."""
    for name in ctx.experience:
        forward_pass(ctx, it, lengths, PASSES[name])
