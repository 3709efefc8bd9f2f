"""bench_drafter.py's work: each training set's rows (drafter_levers.py) from the pools, each
drafter trained once per set and seed (a rerun finds it trained), and `regen score` of every
drafter on the held-out answers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import xxhash

import drafter_blend as blend
import drafter_eagle3 as eagle3
import drafter_report as report
import drafter_rows as rows_of
import drafter_steps as steps
import drafter_train as training
from drafter_levers import SETS
from drafter_pools import Pools
from drafter_rows import Row

KINDS = ("layer-skip", "eagle3")
SKEW = {"code": 0.77}  # the seeds' team's blend; the other domains share the rest
ALLOW = ("truncated=1",)  # answers are capped to fit two cores: most are cut
DRAFT_VOCAB = 8192  # of the target's 49,152, as EAGLE-3 heads draft a quarter of it
CURRENT = ("layer-skip", "default-half", 0)  # the drafter whose score selects rows
CUT_SHARE = 0.3  # of the truncated lever's kept arm: a thinking model's long tail, say


@dataclass
class Matrix:
    pools: Pools
    budget: int  # supervised tokens per drafter
    k: int  # the draft length the table reads
    target: Path  # the target's Hugging Face folder
    log: Path
    trained: dict[str, dict] = field(default_factory=dict)
    _target_model: Any = None

    @property
    def work(self) -> Path:
        return self.pools.work

    def export(self, name: str, runs: list[str], *flags: Any) -> Path:
        """One `regen export --format speculators` of pool runs, made once."""
        out = self.work / "exports" / name
        if not (out / ".regen-export").is_file():
            paths = [self.pools.run(r) for r in runs]
            steps.export(
                paths, out, self.log, allow=ALLOW, flags=["--format", "speculators", *flags]
            )
        return out

    def pool(self, name: str = "pool-t0", *flags: Any) -> list[Row]:
        return rows_of.read_export(self.export(name, ["pool-t0"], *flags))

    def prompts(self, blend_name: str) -> list[str]:
        n = self.pools.sizes.blend
        weights = None
        if blend_name == "skewed":
            weights = {d: SKEW.get(d, 0.0) for d in self.pools.sources}
            rest = (1 - sum(weights.values())) / sum(1 for v in weights.values() if not v)
            weights = {d: v or rest for d, v in weights.items()}
        return rows_of.prompt_ids(self.pools.blend(blend_name, weights, n))

    def rows(self, name: str, kind: str) -> list[Row]:
        """The training set's rows (the export's own lines), drawn as its lever says."""
        if name in ("default", "default-half"):
            return rows_of.of_prompts(self.pool(), self.prompts("balanced"))
        if name == "skewed":
            return rows_of.of_prompts(self.pool(), self.prompts("skewed"))
        if name == "lacks":
            return rows_of.of_prompts(self.pool(), self.lacks(kind))
        if name.startswith("select-"):
            x = self.threshold(1 / 3 if "hardest-third" in name else 2 / 3)
            return self.pool(f"select-{x}", "--score", self.current_score(), "--max-acceptance", x)
        if name == "hard-first":  # each domain's file read in order to its share of the budget
            ordered = self.pool(
                "hard-first", "--score", self.current_score(), "--order", "hard-first"
            )
            domains = sorted({r.domain for r in ordered})
            share = self.budget // len(domains)
            return [
                r
                for d in domains
                for r in rows_of.up_to([r for r in ordered if r.domain == d], share)
            ]
        if name.startswith("truncated-"):
            return self.truncated(kept=name == "truncated-kept")
        if name == "original":
            return rows_of.read_export(self.export("original", ["original"]))
        hot = rows_of.read_export(self.export("t07", ["t07-two", "t07-one"]))
        two = set(rows_of.prompt_ids(self.pools.halves()[0]))
        if name == "t07":
            return [r for r in hot if r.sample == 0]
        if name == "mix":  # the first half's prompts at 0, the second half's at 0.7
            return rows_of.of_prompts(self.pool(), two) + [r for r in hot if r.id not in two]
        if name == "two-samples":
            return [r for r in hot if r.id in two]
        raise SystemExit(f"unknown training set {name}")

    def truncated(self, kept: bool) -> list[Row]:
        """The pool's finished rows (`export --drop-truncated`), and for the kept arm as many
        cut rows as make CUT_SHARE of the set: a cap that cuts most answers (as here) would
        make dropping them a matter of having no data, not of what a cut row teaches."""
        finished = self.pool("pool-t0-drop", "--drop-truncated")
        if not kept:
            return finished
        done = {(r.id, r.sample) for r in finished}
        cut = [r for r in self.pool() if (r.id, r.sample) not in done]
        cut.sort(key=lambda r: xxhash.xxh3_64_intdigest(r.id.encode(), seed=self.pools.sizes.seed))
        return finished + cut[: round(len(finished) * CUT_SHARE / (1 - CUT_SHARE))]

    def draft_folder(self, kind: str, name: str, seed: int) -> Path:
        return self.work / "drafts" / f"{kind}-{name}-s{seed}"

    def train(self, kind: str, name: str, seed: int) -> dict:
        """One drafter, trained unless a run before trained it (its trained.json)."""
        folder = self.draft_folder(kind, name, seed)
        done = folder / "trained.json"
        if done.is_file():
            return json.loads(done.read_text())
        rows = self.rows(name, kind)
        tokens = self.budget // 2 if SETS[name].half_budget else self.budget
        budget = training.Budget(tokens=tokens, seed=seed)
        if kind == "layer-skip":
            got = training.train([r.pair for r in rows], self.target, folder, budget)
        else:
            got = self.train_eagle3(name, rows, folder, budget)
        made = rows_of.describe(rows)
        made |= {"steps": got.steps, "tokens": got.tokens, "seconds": round(got.seconds)}
        made |= {"passes": got.tokens / max(1, made["supervised_tokens"])}
        made |= {"loss_first_last": got.first_and_last()}
        done.write_text(json.dumps(made, indent=1))
        return json.loads(done.read_text())  # as a later run finds it (lists, not tuples)

    def train_eagle3(self, name: str, rows: list[Row], folder: Path, budget: training.Budget):
        digest = xxhash.xxh3_64_hexdigest("".join(r.line + "\n" for r in rows).encode())
        base = self.work / "eagle3" / f"{name.split('-')[0]}-{digest[:12]}"  # one per row set
        data = rows_of.write_jsonl(rows, base / "rows.jsonl")
        prep = eagle3.prepare(data, self.target, base / "prepared", self.log)
        eagle3.hidden_states(prep, self.target_model(), self.work / "eagle3" / "hidden-cache")
        vocab = self.export("vocab", ["pool-t0"], "--draft-vocab-size", DRAFT_VOCAB)
        return eagle3.train(prep, self.target, vocab / "draft_vocab", folder, budget)

    def target_model(self) -> Any:
        if self._target_model is None:
            from regen.score.checkpoints.placement import Placement
            from regen.score.checkpoints.target_pass import TargetPass

            placement = Placement("cpu", "float32").resolved()
            self._target_model = TargetPass(self.target, placement, 1, "the bench's target")
        return self._target_model

    def score(self, held: str, drafts: list[Path], out: Path | None = None) -> dict[str, dict]:
        """Every drafter on one run (a held-out one unless `out` says), every row; drafts
        scored before (and not trained again since) are kept as they are."""
        out = out or self.work / "score" / held
        done = out / "score.json"
        seen = (
            {d["name"] for d in json.loads(done.read_text())["drafts"]} if done.is_file() else set()
        )
        new = [d for d in drafts if d.name not in seen or _newer(d, done)]
        if new:
            steps.score(self.pools.run(held), new, out, self.log, k=f"{self.k},5")
        return report.scored(out, self.k)

    def current_score(self) -> Path:
        """`regen score` of the pool by the current drafter: what selection reads."""
        out = self.work / "score" / "pool-current"
        if not (out / "score.json").is_file():
            self.train(*CURRENT)
            steps.score(
                self.pools.run("pool-t0"),
                [self.draft_folder(*CURRENT)],
                out,
                self.log,
                k=str(self.k),
            )
        return out / "score.json"

    def threshold(self, quantile: float) -> str:
        """The pool's acceptance (by the current drafter) at a quantile, as export takes it."""
        report_ = json.loads(self.current_score().read_text())
        rows_file = Path(report_["drafts"][0]["rows_file"])
        values = sorted(
            json.loads(line)["acceptance"] for line in rows_file.read_text().splitlines()
        )
        return f"{values[min(len(values) - 1, int(quantile * len(values)))]:.4f}"

    def lacks(self, kind: str) -> list[str]:
        """The lacks blend's prompts for this kind: weights from its default at B/2 and B,
        read on the pool's rows that neither trained (outside the balanced blend) nor judge
        the blend (the held-out runs): weights read on the rows that then score the blend
        would be fitted to them."""
        trained = set(self.prompts("balanced"))
        drafts = [self.draft_folder(kind, name, 0) for name in ("default-half", "default")]
        for draft in drafts:
            self.train(kind, draft.name.removeprefix(f"{kind}-").removesuffix("-s0"), 0)
        self.score("pool-t0", drafts, out=self.work / "score" / "pool-outside-blend")
        done = json.loads((self.work / "score" / "pool-outside-blend" / "score.json").read_text())
        files = {d["name"]: Path(d["rows_file"]) for d in done["drafts"]}
        low, high = (blend.tau_outside(files[d.name], trained, self.k) for d in drafts)
        shares = blend.weights(low, high)
        made = self.pools.blend(f"lacks-{kind}", shares, self.pools.sizes.blend)
        recipe = made.with_suffix(".yaml")
        if not recipe.read_text().startswith("#"):
            blend.annotate(recipe, blend.recipe_comments(low, high, self.k))
        return rows_of.prompt_ids(made)


def _newer(draft: Path, score_json: Path) -> bool:
    """Trained again since the score: its config.json is newer than score.json."""
    return (draft / "config.json").stat().st_mtime > score_json.stat().st_mtime
