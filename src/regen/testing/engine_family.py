"""A family of engines drawn at random (issue 56): live concurrency judged on engines it has
never seen, not on one fake it was tuned on. A draw is a function of its seed, so a draw on
which the defaults do badly replays (`draw(seed)`).

What a draw varies, over a fleet of SERVERS fake_scheduler engines:
- the knee, 16 to 1,024 in flight (log-uniform), in one of three shapes: `cap` (a running
  limit: the engine queues past it, as vLLM's max_num_seqs), `peak` (each step slows faster
  than the batch grows past it: output falls, as a CPU engine's past its cores) and `flat`
  (output still creeps up past it, so the KV cache decides);
- where the KV cache runs out against the knee: 0.3x (before it) to 6x (far after it);
- how hard the cliff past the cache bites: a preempted request's recompute, a token, at
  0.05x (mild) to 5x (thrashing) of a decode token's cost at the knee;
- answers of 100 to 8,000 tokens (log-uniform), within +-10-50%;
- /metrics present or absent;
- faults at every server, in half the draws: in-stream errors after half the answer,
  refusals before the first token, bursts of 429, or stalls, at 1-10% of requests;
- one server of the fleet at half speed, in a quarter of them;
- a busy client, in a quarter of them (CPU hogs beside the HTTP run; a lagging loop in
  virtual time).

The clock is scaled so that an answer near the knee takes a few seconds (longer where the
fleet holds more requests: the client on two cores reads every stream), and the run is
`rounds` answer times long; `fixed_levels` brackets the draw's best fixed level.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from regen.testing.fake_scheduler import EngineCurve

SERVERS = 4
PROMPT = 60  # words a prompt (bench/engine_fleets.write_prompts), a token each on the fakes
GROWTH = 0.55  # a running request holds its prompt and about this share of its answer
STEP_S = 0.02  # a decode step of one request (the knee's shape sets the rest)
ANSWER_S = 2.0  # real seconds an answer near the knee takes, at least
FLEET_ANSWERS_S = 100.0  # answers a second the client reads at most (two cores)
RUN_S = 90.0  # a run's wall time, about, at most (its rounds are fewer where answers are long)
CAP = 1024  # regen's default cap a server
FAULT_KINDS = {"after": "stream_error", "before": "stream_refused", "stall": "stall"}


@dataclass(frozen=True)
class Draw:
    seed: int
    curves: tuple[EngineCurve, ...]  # one per server, on the scaled clock
    tokens: int  # an answer's middle length
    jitter: float  # lengths uniform within tokens * (1 +- jitter)
    faults: tuple[str, ...]  # cycled per request at every server (fake_behaviour.Behaviour)
    busy_client: bool
    shape: str  # cap | peak | flat
    knee: int
    kv_fit: int  # requests the KV cache holds at this mix
    cliff: float  # a recompute token's cost over a decode token's at the knee
    prompts: int  # how many the run answers
    answer_s: float  # real seconds an answer takes near the knee

    @property
    def stall_timeout(self) -> float:
        """A stalled stream is cut after this (`--stall-timeout`): a few answers' time."""
        return 4 * self.answer_s

    def fixed_levels(self) -> list[int]:
        """Levels around the draw's best fixed one: the knee, the cache's edge, and steps
        either side of the lower of the two."""
        edge = min(self.knee, self.kv_fit) if self.shape != "flat" else self.kv_fit
        around = {round(edge * f) for f in (0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0)}
        return sorted(n for n in around | {self.knee, self.kv_fit} if 1 <= n <= CAP) or [CAP]

    def label(self) -> str:
        faults = sorted(set(self.faults) - {"ok"})
        share = sum(f != "ok" for f in self.faults) / max(1, len(self.faults))
        metrics = "on" if self.curves[-1].metrics else "off"
        return (
            f"#{self.seed}: {self.shape} knee {self.knee}, kv {self.kv_fit}, cliff "
            f"{self.cliff:.2g}, {self.tokens} tok, metrics {metrics}"
            + (f", {','.join(faults)} {share:.0%}" if faults else "")
            + (", one slow" if self.curves[0] != self.curves[-1] else "")
            + (", busy client" if self.busy_client else "")
        )


def draw(seed: int) -> Draw:
    rng = random.Random(seed)
    knee = round(math.exp(rng.uniform(math.log(16), math.log(1024))))
    shape = rng.choice(["cap", "peak", "flat"])
    kv_fit = max(8, round(knee * math.exp(rng.uniform(math.log(0.3), math.log(6)))))
    tokens = round(math.exp(rng.uniform(math.log(100), math.log(8000))))
    cliff = math.exp(rng.uniform(math.log(0.05), math.log(5)))
    curve = _curve(shape, knee, kv_fit, tokens, cliff, rng)
    best = min(CAP, knee if shape != "flat" else kv_fit, kv_fit)
    step = curve.step_seconds(min(best, curve.max_running))
    answer_s = max(ANSWER_S, SERVERS * best / FLEET_ANSWERS_S)
    scale = answer_s / (tokens * step)
    # A tick of the engine is at least 10 ms of wall time (its CPU, and the streams' writes).
    curve = replace(
        curve,
        time_scale=scale,
        ticks=max(1, math.ceil(0.01 / (step * scale))),
        metrics=rng.random() < 0.5,
    )
    slow = rng.random() < 0.25
    curves = (_slowed(curve) if slow else curve,) + (curve,) * (SERVERS - 1)
    rounds = max(4.0, min(rng.uniform(6, 20), RUN_S / answer_s))
    prompts = max(1000, min(20_000, round(rounds * SERVERS * best)))
    return Draw(
        seed=seed,
        curves=curves,
        tokens=tokens,
        jitter=round(rng.uniform(0.1, 0.5), 2),
        faults=_faults(rng),
        busy_client=rng.random() < 0.25,
        shape=shape,
        knee=knee,
        kv_fit=kv_fit,
        cliff=cliff,
        prompts=prompts,
        answer_s=answer_s,
    )


def _curve(
    shape: str, knee: int, kv_fit: int, tokens: int, cliff: float, rng: random.Random
) -> EngineCurve:
    if shape == "cap":  # still rising at the knee, where the running limit stops it
        curve = EngineCurve(step_s=STEP_S, per_seq_s=STEP_S / (4 * knee), max_running=knee)
    elif shape == "peak":  # step/n is least at the knee: output falls past it
        curve = EngineCurve(
            step_s=STEP_S,
            per_seq_s=STEP_S / (4 * knee),
            per_seq2_s=STEP_S / knee**2,
            max_running=1_000_000,
        )
    else:  # half the top output at the knee, still creeping up past it
        curve = EngineCurve(step_s=STEP_S, per_seq_s=STEP_S / knee, max_running=1_000_000)
    token_cost = curve.step_seconds(knee) / knee  # a decode token's, at the knee
    return replace(
        curve,
        kv_tokens=round(kv_fit * (PROMPT + GROWTH * tokens)),
        prefill_s=token_cost * rng.uniform(0.02, 0.3),
        recompute_s=token_cost * cliff,
    )


def _slowed(curve: EngineCurve) -> EngineCurve:
    """Half the speed: another GPU kind, or one shared with another job."""
    return replace(
        curve,
        step_s=2 * curve.step_s,
        per_seq_s=2 * curve.per_seq_s,
        per_seq2_s=2 * curve.per_seq2_s,
        prefill_s=2 * curve.prefill_s,
        recompute_s=2 * (curve.recompute_s or 0.0),
    )


def _faults(rng: random.Random) -> tuple[str, ...]:
    """Half the draws clean; else one kind at 1-10% of requests (429s in bursts of 20)."""
    if rng.random() < 0.5:
        return ()
    kind = rng.choice(["after", "before", "429", "stall"])
    share = rng.uniform(0.01, 0.1)
    if kind == "429":
        every = round(20 / share)
        return ("ok",) * (every - 20) + ("429",) * 20
    every = max(2, round(1 / share))
    return ("ok",) * (every - 1) + (FAULT_KINDS[kind],)
