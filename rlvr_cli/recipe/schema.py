"""The recipe schema: one field per choice in the math (docs/design.md §2).

Every model forbids unknown keys (a typo is an error, not a silent default) and carries its domain
in its constraints. Each field's docstring names the symbol it sets, so ``rlvr recipes show`` and the
README's field table come from the same words. Notation: prompt q, group of G responses o_1..o_G with
rewards r_i, |o_i| response tokens, rho_t the per-token importance ratio, beta the KL coefficient.

The allowed values of the algorithm axes are the ``Literal`` aliases below; the registries in
:mod:`rlvr_cli.algo` are keyed by exactly these names (a test checks that they agree).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, model_validator

from rlvr_cli.recipe.objectives import (
    MAX_RATIO_BOUND, OBJECTIVES, Objective, PPOClipObjective, check_loss, objective_notes,
)
from rlvr_cli.recipe.strict import Strict

# --- names of the choices: one source for the schema and the algorithm registries -------------
Baseline = Literal["group_mean", "leave_one_out", "none"]
AdvantageScale = Literal["group_std", "batch_std", "none", "mean"]
RatioLevel = Literal["token", "sequence"]
Aggregation = Literal["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"]
KLPlacement = Literal["loss", "reward", "none"]
KLEstimator = Literal["k1", "k2", "k3"]
VerifierName = Literal["task", "integer", "math", "countdown", "code", "reasoning_gym"]
Schedule = Literal["constant", "linear", "cosine"]
ISMode = Literal["none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"]
PassKMethod = Literal["pkpo", "analytic"]
Seed = Annotated[int, Field(ge=0, lt=2**63)]
"""A seed torch's generators accept as given (0 <= seed < 2**63)."""

# --- bounds from the arithmetic (issue 44): every numeric knob has both ends, each with its reason -----
MAX_STEPS = 10_000_000
"""Steps, and every period counted in steps: a step appends a ~1.5 KB metrics line, so 1e7 steps are 15 GB
of metrics (months of training); a larger count is a typo, not a run."""
MAX_COEF = 1e4
"""A coefficient of a term of the loss or the reward (beta, entropy bonus, penalty factors, reward weights):
the terms are of order 1 (0/1 rewards, entropy <= log V ~ 12 nats, |A| <= sqrt(G)), so 1e4 times one stays far
inside float32 (3.4e38) while the others keep a few digits beside it; 1e300 is inf in float32 and turns the
loss and the metrics into NaN."""
MAX_THREADS = 4096
"""torch CPU threads: torch takes an int32 (1e30 overflows), and more threads than cores only contend."""
MAX_SAMPLES = 4096
"""Samples per prompt of an evaluation (eval.n, `rlvr eval --n`, `rlvr sample --n`)."""
MAX_TOKENS = 1_000_000
"""A response or length limit in tokens: no model rlvr loads has a context beyond 1M tokens."""
MAX_BATCH_TOKENS = 2**31
"""Responses x tokens of one sampling batch: the (B, L) token, log-prob and mask tensors alone are 2**31 * 13
bytes = 28 GB at this size, before any activation; a larger batch cannot fit in memory."""
MAX_EVAL_RESPONSES = 10**8
"""Responses of one evaluation (eval.num_prompts x eval.n): each keeps its text and verdict until the record is
written, about 200 bytes, so 1e8 of them are 20 GB."""
MAX_FORMAT_WIDTH = 1000
"""Largest width or precision in a prompt template's format spec: str.format allocates the padded string at
once (a width of 1e9 is a gigabyte per prompt), and no question needs a field padded beyond 1000 characters."""
TEMPERATURE_MIN, TEMPERATURE_MAX = 1e-3, 10.0
Temperature = Annotated[float, Field(ge=TEMPERATURE_MIN, le=TEMPERATURE_MAX)]
"""A sampling temperature: logits / T must stay finite in float32 (T >= 1e-3); above 10 every token is about
equally likely (logits of a trained model span a few tens)."""
AdamBeta = Annotated[float, Field(ge=0, lt=1)]
TopP = Annotated[float, Field(ge=1e-6, le=1)]
"""A nucleus mass: at least 1e-6 (any smaller top_p keeps the most likely token alone, as 1e-6 does; below 1.4e-45
float32 rounds it to 0 and every token is dropped, NaN)."""


# --- model -------------------------------------------------------------------------------------
class LoraSpec(Strict):
    """A LoRA adapter (peft) on the policy: only the adapter trains; the reference is the base weights."""

    rank: int = Field(16, ge=1, le=4096)
    """r: rank of each low-rank update B A."""
    alpha: float = Field(32.0, gt=0, le=65504)
    """lora_alpha: the update is scaled by alpha / rank; at most 65504, float16's largest number (the scale multiplies activations that may be half precision; 1e300 is inf even in float32)."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """lora_dropout; RL forwards run with dropout off (so the on-policy ratio is 1): it acts in SFT only."""
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Module names (suffixes) that get an adapter, e.g. [q_proj, v_proj]; `all-linear`: every linear layer but the output head."""


class ModelSpec(Strict):
    name: str = "builtin:tiny"
    """Policy initialisation: `builtin:tiny`, `builtin:tiny-countdown`, `builtin:tiny-init` (untrained), a run directory (its latest checkpoint), a checkpoint directory, or a Hugging Face model id / local path."""
    reference: str | None = None
    """Reference policy pi_ref for the KL term; null means the same as `name`."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights dtype; `auto` is float32 on CPU and float32 weights with bf16 autocast on CUDA."""
    autocast: Literal["auto", "none", "bfloat16", "float16"] = "auto"
    """Autocast dtype of sampling, log-probs and the update, the weights and optimiser staying model.dtype; `auto`: what model.dtype implies (bf16 on CUDA with dtype auto, none on the CPU). On a CPU without avx512_bf16/amx, bf16 is slower than float32."""
    lora: LoraSpec | None = None
    """Train a LoRA adapter instead of every weight (null = full fine-tuning); checkpoints hold the adapter only."""


# --- tasks ---------------------------------------------------------------------------------------
class ArithmeticStyles(Strict):
    """Mixture weights of the supervised trace styles (normalised; need not sum to 1; each at most 1e6, so that their sum stays finite)."""

    direct: float = Field(1.0, ge=0, le=1e6)
    """`#632`: the answer alone."""
    terse: float = Field(1.0, ge=0, le=1e6)
    """`12,13,6#632`: column totals right to left, then the answer."""
    verbose: float = Field(1.0, ge=0, le=1e6)
    """`7+5=12,4+8+1=13,3+2+1=6#632`: one equation per column, then the answer."""

    @model_validator(mode="after")
    def _some_weight(self):
        if self.direct + self.terse + self.verbose <= 0:
            raise ValueError("at least one style needs a positive weight")
        return self


class ArithmeticTaskSpec(Strict):
    """Zero-padded multi-digit addition (`347+285=`); the answer follows the marker `#`."""

    name: Literal["arithmetic"] = "arithmetic"
    """Task kind (the section's other fields depend on it)."""
    digits: int = Field(3, ge=1, le=9)
    """Digits per operand (operands are zero-padded to this width)."""
    num_eval: int = Field(256, ge=1, le=100_000)
    """Size of the held-out prompt set (disjoint from every training prompt)."""
    split_seed: Seed = 1234
    """Seed that picks the held-out prompts; shared by all runs so evaluations line up."""
    styles: ArithmeticStyles = Field(default_factory=ArithmeticStyles)
    check_max: int = Field(3, ge=0, le=8)
    """Up to this many redundant checks `=632` restating the answer (uniform 0..check_max)."""
    check_position: Literal["after", "before", "both"] = "after"
    """Where the checks sit: after the answer, before the marker, or either (chosen per trace)."""
    error_rate: float = Field(0.25, ge=0, le=1)
    """Probability that a trace carries one deliberate column error, propagated to the answer."""
    error_column: Literal["any", "last"] = "any"
    """Which column a deliberate error hits: any (uniform), or only the last (leftmost) one, so that the work ends right after the error (with `ramble_position: before_answer` the filler then follows the wrong column directly)."""
    error_mark: str = Field("", max_length=1, pattern=r"^[^0-9,=#+]?$")
    """Written just before a deliberately wrong column total (`4+8+1=?14`): a visible guess, so that a model can condition what it writes next on its own error (it cannot re-check its arithmetic). Empty: no mark."""
    ramble_prob: float = Field(0.0, ge=0, le=1)
    """Probability that a trace opens with 1..ramble_max filler words `wait,` (uncertainty talk)."""
    ramble_max: int = Field(3, ge=1, le=8)
    """Most filler words at the start of a rambling trace."""
    ramble_length: Literal["uniform", "geometric"] = "uniform"
    """How many filler words: uniform 1..ramble_max, or geometric with the same mean (the same chance of one more word after each, so no length is a hard stop)."""
    ramble_error_rate: float = Field(0.6, ge=0, le=1)
    """Error probability of a rambling trace (replaces error_rate): makes verbosity predict errors."""
    ramble_position: Literal["start", "before_answer", "after_error"] = "start"
    """Where the filler sits: at the start (decided before the work), after the work just before the answer, or right after the wrong column (a random column in a correct trace), so a model can learn to ramble when its own work went wrong."""
    prompt_template: str | None = None
    """A question for an instruct model, a Python format string over the operands `a` and `b` (e.g. `What is {a} + {b}?`, operands not zero-padded); the answer is then read from free text with `reward.extract` (no `#` marker). null: the raw `347+285=` form of the built-in model."""
    chat_template: bool = False
    """Wrap the prompt in the tokenizer's chat template (instruction-tuned models; needs prompt_template)."""
    system_prompt: str | None = None
    """A system message before the question (needs chat_template)."""

    @model_validator(mode="after")
    def _chat_form(self):
        if self.prompt_template is not None:
            _check_template(self.prompt_template, {"a", "b"})
        if self.chat_template and self.prompt_template is None:
            raise ValueError("chat_template needs prompt_template (a question such as `What is {a} + {b}?`), not the raw `347+285=` form")
        _check_system_prompt(self)
        return self


def _check_template(template: str, fields: set[str] | None) -> None:
    """A prompt template ``str.format`` can fill: its fields among ``fields`` (None: the data's columns, unknown
    here), and no format spec that would build a huge string (a width or precision over MAX_FORMAT_WIDTH, or
    one taken from the data through a nested ``{field}``)."""
    import re
    import string

    try:
        parts = [(name, spec or "") for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        raise ValueError(f"prompt_template {template!r}: {e}") from None
    unknown = {name for name, _ in parts} - fields if fields is not None else set()
    if unknown:
        raise ValueError(f"prompt_template {template!r}: unknown field(s) {sorted(unknown)} (available: {sorted(fields)})")
    for name, spec in parts:
        if "{" in spec:
            raise ValueError(f"prompt_template: field {{{name}:{spec}}} takes its format from a nested field; "
                             "write the width as a number")
        widest = max((int(n) for n in re.findall(r"\d+", spec)), default=0)
        if widest > MAX_FORMAT_WIDTH:
            raise ValueError(f"prompt_template: field {{{name}:{spec}}} pads or cuts to {widest} characters; "
                             f"at most {MAX_FORMAT_WIDTH} (str.format builds the whole string at once)")


def _check_system_prompt(spec) -> None:
    if spec.system_prompt is not None and not spec.chat_template:
        raise ValueError("system_prompt needs chat_template: true (a raw prompt has no system message)")


class CountdownTaskSpec(Strict):
    """Reach a target from given numbers with + - * /, each number used at most once (`3,5,7>22:`)."""

    name: Literal["countdown"] = "countdown"
    """Task kind."""
    count: int = Field(3, ge=2, le=4)
    """How many numbers each prompt gives."""
    max_number: int = Field(9, ge=2, le=99)
    """Numbers are drawn from 1..max_number."""
    max_target: int = Field(99, ge=2, le=10_000)
    """Targets are integers in 1..max_target reachable from the numbers."""
    num_eval: int = Field(256, ge=1, le=100_000)
    """Size of the held-out prompt set."""
    split_seed: Seed = 1234
    """Seed that picks the held-out prompts."""
    verbose_prob: float = Field(0.5, ge=0, le=1)
    """Probability that a supervised trace shows its intermediate steps before the final equation."""
    error_rate: float = Field(0.25, ge=0, le=1)
    """Probability that a supervised trace carries a deliberate mistake (its equation misses the target)."""


class DatasetTaskSpec(Strict):
    """Any JSONL / Parquet / CSV file or Hugging Face dataset with a question and a final answer."""

    name: Literal["dataset"] = "dataset"
    """Task kind."""
    path: str
    """A local .jsonl/.json/.parquet/.csv file, or a Hugging Face dataset name."""
    config: str | None = None
    """Dataset configuration name (e.g. `main` for gsm8k)."""
    split: str = "train"
    """Split that training prompts come from."""
    eval_split: str | None = None
    """Hub dataset split of the held-out prompts (e.g. `test`); null means `eval_path` or a hashed fraction of `split`."""
    eval_path: str | None = None
    """A local file of held-out prompts (same fields), for file datasets."""
    eval_fraction: float = Field(0.1, gt=0, lt=1)
    """Fraction of `split` held out (by a hash of the question) when `eval_split` is null."""
    num_eval: int | None = Field(None, ge=1, le=10_000_000)
    """Cap on the number of held-out prompts (first N in a fixed order; at most 1e7, a cap above any file rlvr reads in memory)."""
    question_field: str = "question"
    """Column holding the question: text (formatted with prompt_template), or a conversation, a list of {role, content} messages as in TRL's conversational datasets (used as it is, with chat_template; prompt_template is not applied)."""
    answer_field: str = "answer"
    """Column holding the gold answer (or a solution it is extracted from)."""
    answer_extraction: Literal["gsm8k", "boxed", "none", "regex"] = "none"
    """How to get the gold answer from `answer_field`: GSM8K's `#### 42`, the last `\\boxed{}`, the field as is, or `answer_regex` (first group)."""
    answer_regex: str | None = None
    """Regular expression whose first group is the gold answer (with answer_extraction `regex`)."""
    prompt_template: str = "{question}\n"
    """Python format string over the row's fields."""
    chat_template: bool = False
    """Wrap the prompt in the tokenizer's chat template (instruction-tuned models)."""
    system_prompt: str | None = None
    """A system message before the question (needs chat_template)."""
    verifier: Literal["math", "integer"] = "math"
    """Verifier that decides correctness for this dataset."""
    reward_columns: list[str] = Field(default_factory=list)
    """Columns passed to `function` reward terms as keyword arguments of the same name (one value per completion, as TRL passes a dataset's columns); the gold answer always comes as `answer`."""

    @model_validator(mode="after")
    def _regex_given(self):
        _check_template(self.prompt_template, None)
        if self.answer_extraction == "regex" and not self.answer_regex:
            raise ValueError("answer_extraction 'regex' needs answer_regex")
        if self.answer_regex is not None:
            import re

            try:
                groups = re.compile(self.answer_regex).groups
            except re.error as e:
                raise ValueError(f"answer_regex {self.answer_regex!r}: not a valid regular expression ({e})") from None
            if groups < 1:
                raise ValueError(f"answer_regex {self.answer_regex!r}: needs a group, e.g. `answer: (\\S+)` (the first group is the answer)")
        if self.eval_split and self.eval_path:
            raise ValueError("give eval_split (hub datasets) or eval_path (local files), not both")
        _check_system_prompt(self)
        _check_reward_columns(self.reward_columns)
        return self


RESERVED_REWARD_KWARGS = frozenset({"prompts", "completions", "completion_ids", "answer", "trainer_state", "log_extra",
                                    "log_metric", "prompt", "completion"})
"""Keyword arguments a `function` reward term gets from rlvr (TRL's names): no dataset column may take one."""


def _check_reward_columns(columns: list[str]) -> None:
    if len(set(columns)) != len(columns):
        raise ValueError(f"reward_columns lists a column twice: {columns}")
    for c in columns:
        if not c.isidentifier():
            raise ValueError(f"reward_columns: {c!r} is not a Python identifier, so it cannot be a keyword argument")
        if c in RESERVED_REWARD_KWARGS or c.startswith("rlvr_"):
            raise ValueError(f"reward_columns: {c!r} is a keyword rlvr passes itself ({', '.join(sorted(RESERVED_REWARD_KWARGS))}, "
                             "rlvr_*); rename the column")


class ReasoningGymTaskSpec(Strict):
    """A procedural generator of reasoning-gym, scored by its own scorer in the verifier pool (extra `reasoning-gym`; rlvr_cli/tasks/reasoning_gym.py)."""

    name: Literal["reasoning_gym"] = "reasoning_gym"
    """Task kind."""
    dataset: str
    """reasoning-gym generator name, e.g. `countdown`, `basic_arithmetic`, `gsm_symbolic`, `chain_sum`."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the generator (its own configuration fields, e.g. `min_numbers: 3`)."""
    num_eval: int = Field(256, ge=1, le=100_000)
    """Size of the held-out set (items 0..num_eval-1 of the generator seeded with split_seed)."""
    num_train: int = Field(10_000, ge=1, le=10_000_000)
    """Size of the training pool (a second generator seeded with split_seed + 1; held-out questions are skipped)."""
    split_seed: Annotated[int, Field(ge=0, lt=2**63 - 1)] = 1234
    """Seed of the held-out generator (shared by every run so evaluations line up); the training generator takes split_seed + 1, so below 2**63 - 1."""
    prompt_template: str = "{question}\nGive your final answer inside <answer></answer> tags.\n"
    """Python format string over `question`; the verifier reads the last <answer>...</answer>."""
    chat_template: bool = False
    """Wrap the prompt in the tokenizer's chat template (instruction-tuned models)."""
    system_prompt: str | None = None
    """A system message before the question (needs chat_template)."""
    correct_threshold: float = Field(1.0, gt=0, le=1)
    """A response is `correct` when the generator's score is at least this (its scorers give partial credit)."""

    @model_validator(mode="after")
    def _system_needs_chat(self):
        _check_template(self.prompt_template, {"question"})
        _check_system_prompt(self)
        return self


class AnswerCheckTaskSpec(Strict):
    """Addition answered first and checked after (`347+285=` -> `####632` newline `7+5=12,...=632?ok`); the answer is the line after `####`."""

    name: Literal["answer_check"] = "answer_check"
    """Task kind."""
    digits: int = Field(3, ge=1, le=9)
    """Digits per operand (operands are zero-padded to this width)."""
    num_eval: int = Field(256, ge=1, le=100_000)
    """Size of the held-out prompt set (disjoint from every training prompt)."""
    split_seed: Seed = 1234
    """Seed that picks the held-out prompts; shared by all runs so evaluations line up."""
    check: Literal["verbose", "terse"] = "verbose"
    """How the check re-derives the sum after the answer: one equation per column (`7+5=12,...`) or the column totals (`12,13,6`)."""
    answer_error_rate: float = Field(0.3, ge=0, le=1)
    """Probability that a supervised trace's answer is wrong (one column total off by 1-3, propagated); its check then ends `?no`."""
    ramble_given_wrong: float = Field(0.9, ge=0, le=1)
    """Probability of filler `,wait` after a check that ends `?no`."""
    ramble_given_right: float = Field(0.1, ge=0, le=1)
    """Probability of filler `,wait` after a check that ends `?ok`."""
    ramble_mean: float = Field(4.0, ge=1, le=16)
    """Mean number of filler words when a trace rambles (geometric: the same chance of one more word after each)."""
    check_marks: bool = False
    """Zero-pad the answer to digits+1 and mark each check column whose digit disagrees with the answer's with `!` (`4+8+1=13!`), so the verdict is a local comparison."""


TaskSpec = Annotated[Union[ArithmeticTaskSpec, CountdownTaskSpec, DatasetTaskSpec, ReasoningGymTaskSpec, AnswerCheckTaskSpec], Field(discriminator="name")]


# --- rollout -------------------------------------------------------------------------------------
class ISCorrectionSpec(Strict):
    """Truncated importance sampling against sampler/trainer mismatch (Yao et al. 2025; TRL's `vllm_importance_sampling_mode`, verl's `rollout_correction`): each token's policy loss is weighted by w = pi_trainer / pi_sampler, capped."""

    mode: ISMode = "none"
    """`token_*`: w_t = exp(logp_trainer_t - logp_sampler_t); `sequence_*`: one w = exp(sum_t ...) per response; `*_truncate`: w <- min(w, cap); `*_mask`: w <- 0 where w > cap (or < cap_low); `none`: w = 1 (the mismatch is still logged when the sampler's log-probs are kept). Under rollout.staleness logp_trainer is the proximal policy's, so w = pi_prox / pi_behaviour: decoupled PPO's weight (AReaL masks at its cap: token_mask; verl truncates: token_truncate)."""
    cap: float = Field(2.0, gt=1, le=1000)
    """C: the upper cap on w (verl's default 2.0; TRL's 3.0)."""
    cap_low: float | None = Field(None, gt=0, lt=1)
    """C_low: the lower cap (TRL's clip_min): truncate raises w to it, mask zeroes w below it (null = none)."""


# --- staleness (issue 41): a batch trained at step t sampled by the policy of an earlier step --------------
StalenessMode = Literal["fixed", "bounded"]
StalenessStrategy = Literal["wait", "drop"]


class StalenessSpec(Strict):
    """Asynchronous RL as an ablation axis (docs/async.md): the batch trained at step t is sampled by the policy after step t-1-k's updates, k the lag (TRL `max_staleness`, AReaL `max_head_offpolicyness`, NeMo-RL `max_trajectory_age_steps`, prime-rl `async_level`, tinker `sampling_steps_ahead`); 0 is the synchronous trainer, exactly."""

    max: int = Field(0, ge=0, le=1024)
    """k: the largest lag, in trainer steps, between the policy that samples a batch and the one that trains on it (TRL `max_staleness`, AReaL `max_head_offpolicyness`, NeMo-RL `max_trajectory_age_steps`, prime-rl `async_level`, tinker `sampling_steps_ahead`); 0 = synchronous (on-policy)."""
    mode: StalenessMode = "fixed"
    """`fixed`: every batch is exactly min(k, t-1) steps old (reproducible, in one process or overlapped with `wait`); `bounded`: at most k old, as the sampler keeps up (overlapped only: the lag depends on timing)."""
    strategy: StalenessStrategy = "wait"
    """What a `bounded` sampler does about a batch that would be older than k: `wait` (it never samples further ahead than k, verl's and TRL's default) or `drop` (it samples with the newest weights it has and batches older than k are discarded and resampled)."""
    overlap: bool = False
    """Sample in a second process while this one trains (the overlapped trainer, docs/async.md); false: the stale weights are kept and sampled in-process, a slower run with the same numbers."""

    @model_validator(mode="after")
    def _knobs_act(self):
        if self.mode == "bounded" and self.max == 0:
            raise ValueError("mode bounded with max 0: a lag bounded by 0 is the synchronous trainer (mode fixed)")
        if self.mode == "bounded" and not self.overlap:
            raise ValueError("mode bounded needs overlap true: in one process nothing runs ahead, every batch is "
                             "exactly max steps old (mode fixed)")
        if self.strategy == "drop" and self.mode != "bounded":
            raise ValueError("strategy drop needs mode bounded: at a fixed lag no batch is ever older than max")
        return self


class RolloutSpec(Strict):
    group_size: int = Field(8, ge=2, le=1024)
    """G: responses sampled per prompt (the group that forms the baseline)."""
    prompts_per_step: int = Field(16, ge=1, le=100_000)
    """P: prompts per training step, so a step trains on P*G responses."""
    max_new_tokens: int = Field(64, ge=1, le=1_000_000)
    """L_max: response length limit; a response that reaches it without EOS is truncated."""
    temperature: Temperature = 1.0
    """T (0.001-10): sampling temperature; log-probs in the loss use the same T."""
    top_p: TopP = 1.0
    """Nucleus sampling mass (1 = off; 1e-6..1)."""
    top_k: int = Field(0, ge=0, le=2**31 - 1)
    """Top-k sampling (0 = off; at most 2**31 - 1, torch's int32 size of a vocabulary: a k at or above the vocabulary keeps every token)."""
    old_logprobs: Literal["auto", "sampler", "recompute"] = "auto"
    """Source of log pi_old, PPO's anchor: `sampler` (the behaviour policy's, as sampled), `recompute` (the trainer's forward with this step's weights before its update), `auto` the sampler's when its numerics match the trainer's (float32, no autocast), else recomputed. Under rollout.staleness `recompute` is the proximal policy, not the behaviour, and `auto` keeps the sampler's unless is_correction is on; recompute with is_correction is AReaL's decoupled PPO (docs/async.md)."""
    sample_autocast: Literal["none", "bfloat16", "float16"] = "none"
    """Sample under torch autocast to this dtype while the trainer keeps model.dtype: a real sampler/trainer mismatch (as vLLM bf16 vs an fp32 trainer), testable on CPU."""
    is_correction: ISCorrectionSpec = Field(default_factory=ISCorrectionSpec)
    ignore_eos: bool = False
    """Keep sampling after EOS (it stays an ordinary token), so every response has exactly max_new_tokens tokens and is `length`-finished: fixed work per step, for speed benchmarks only."""
    staleness: StalenessSpec = Field(default_factory=StalenessSpec)


# --- the objective -------------------------------------------------------------------------------
class PassKSpec(Strict):
    """pass@k as the objective, for binary rewards: PKPO's reward transform or the analytic pass@k advantage (rlvr_cli/algo/passk_objectives.py)."""

    method: PassKMethod
    """`pkpo` (Walder & Karkhanis 2025): r_i <- 1 if correct else pass@(k-1) of the other G-1 samples, then the baseline and scale below; `analytic` (Chen et al. 2025): A_i = mean over the k-subsets holding o_i of (max reward - mean) / std, replacing baseline and scale."""
    k: int = Field(..., ge=1, le=1024)
    """k of pass@k (1 <= k <= rollout.group_size, itself at most 1024; k = 1 is the ordinary objective)."""


class AdvantageSpec(Strict):
    baseline: Baseline = "group_mean"
    """b_i: `group_mean` (GRPO) r_i - mean(r), `leave_one_out` (RLOO) r_i - mean_{j!=i} r_j, `none` r_i."""
    scale: AdvantageScale = "group_std"
    """Divide by `group_std` (GRPO), `batch_std` (one std over the batch's rewards), `none` (Dr. GRPO) or `mean` (MaxRL, Tajwar et al. 2026, arXiv 2602.02710: the group's mean reward, its success rate; binary rewards; a group with mean 0 gets A = 0); std uses Bessel (n-1)."""
    eps: float = Field(1e-6, gt=0, le=1)
    """Added to the std before dividing."""
    passk: PassKSpec | None = None
    """Optimise pass@k instead of pass@1 (null = off); needs a binary reward (one verifier term of weight 1, no shaping)."""


class ClipSpec(Strict):
    eps_low: float = Field(0.2, ge=0, lt=1)
    """epsilon_low: the ratio is clipped below at 1 - eps_low."""
    eps_high: float = Field(0.2, ge=0, le=MAX_RATIO_BOUND)
    """epsilon_high: the ratio is clipped above at 1 + eps_high (DAPO clip-higher: 0.28); at most 4.8e8, since no ratio exceeds exp(20) (log-ratios are clamped to +-20)."""
    dual_clip: float | None = Field(None, gt=1, le=MAX_RATIO_BOUND)
    """c of dual-clip PPO: for A < 0 the per-token loss is capped at -c*A (null = off); at most 4.8e8, since no ratio exceeds exp(20)."""

    @model_validator(mode="after")
    def _high_ge_low(self):
        if self.eps_high < self.eps_low:
            raise ValueError(f"eps_high ({self.eps_high}) must be >= eps_low ({self.eps_low})")
        return self


class ClipCovSpec(Strict):
    """Clip-Cov (Cui et al. 2025): detach the gradient of a random clip_ratio fraction of the tokens whose centred covariance (logp_t - mean)(A_t - mean) lies in [lb, ub]."""

    type: Literal["clip_cov"]
    """Covariance remedy kind."""
    clip_ratio: float = Field(2e-4, gt=0, le=1)
    """r: fraction of the minibatch's valid tokens detached (at least one token); 2e-4 as the paper's scripts."""
    lb: float = Field(1.0, ge=-1e6, le=1e6)
    """omega_low: lower covariance bound of the candidates (within +-1e6: a covariance of float32 log-probs, |log p| < 104, and advantages never reaches it)."""
    ub: float = Field(5.0, ge=-1e6, le=1e6)
    """omega_high: upper covariance bound of the candidates (within +-1e6, as lb)."""

    @model_validator(mode="after")
    def _lb_le_ub(self):
        if self.lb > self.ub:
            raise ValueError(f"lb ({self.lb}) must be <= ub ({self.ub})")
        return self


class KLCovSpec(Strict):
    """KL-Cov (Cui et al. 2025): add coef * |logp_t - logp_old_t| to the loss of the top kl_ratio fraction of tokens by centred covariance."""

    type: Literal["kl_cov"]
    """Covariance remedy kind."""
    kl_ratio: float = Field(2e-3, gt=0, le=1)
    """k: fraction of the minibatch's valid tokens penalised (at least one token); 2e-3 as the paper's 7B script."""
    coef: float = Field(1.0, gt=0, le=MAX_COEF)
    """beta: coefficient of the |log-ratio| penalty (the paper's scripts: 1; verl's config default: 0.1); at most 1e4, as every loss coefficient."""


CovPenalty = Annotated[Union[ClipCovSpec, KLCovSpec], Field(discriminator="type")]


class EntropyControlSpec(Strict):
    """Adaptive entropy coefficient (Skywork-OR1, arXiv 2505.22312; TRL `use_adaptive_entropy`): loss.entropy_coef is c_0."""

    target: float = Field(..., gt=0, le=45)
    """H*: target mean token entropy (nats); the bonus acts only once the measured entropy is at or below it. At most 45: a token's entropy is at most log V, and log 2**64 = 44.4."""
    delta: float = Field(0.005, gt=0, le=MAX_COEF)
    """delta: step of c per optimiser update, + when entropy <= target, - otherwise (TRL: 0.005); at most 1e4, as c."""
    coef_min: float = Field(0.0, ge=0, le=MAX_COEF)
    """c_min: lower bound of c."""
    coef_max: float = Field(1.0, gt=0, le=MAX_COEF)
    """c_max: upper bound of c (TRL: 1.0); at most 1e4, as every loss coefficient (c multiplies the entropy in the float32 loss)."""

    @model_validator(mode="after")
    def _min_le_max(self):
        if self.coef_min > self.coef_max:
            raise ValueError(f"coef_min ({self.coef_min}) must be <= coef_max ({self.coef_max})")
        return self


class LossSpec(Strict):
    ratio: RatioLevel = "token"
    """`token`: rho_t = exp(logp_t - logp_old_t) (PPO/GRPO); `sequence`: s_i = exp(mean_t(logp_t - logp_old_t)) (GSPO)."""
    clip: ClipSpec = Field(default_factory=ClipSpec)
    aggregation: Aggregation = "seq_mean_token_mean"
    """The length divisor: `seq_mean_token_mean` (GRPO: mean over sequences of 1/|o_i| sum_t), `token_mean` (DAPO: sum over all tokens / number of tokens), `seq_mean_token_sum_norm` (Dr. GRPO: sum / (num_seqs * L))."""
    length_constant: int | None = Field(None, ge=1, le=MAX_TOKENS)
    """L of `seq_mean_token_sum_norm`; null resolves to rollout.max_new_tokens (never the padded batch length); at most 1e6, a length in tokens."""
    entropy_coef: float = Field(0.0, ge=0, le=MAX_COEF)
    """Entropy bonus: the loss gets - entropy_coef * H, aggregated like the policy loss; at most 1e4, as every loss coefficient."""
    top_entropy_quantile: float | None = Field(None, gt=0, le=1)
    """q of the top-entropy mask (Wang et al. 2025, 0.2 in the paper): only tokens with H_t >= the (1-q) quantile of the minibatch's entropies carry policy gradient; the normaliser still counts every token (null = off)."""
    cov_penalty: CovPenalty | None = None
    """Covariance-based remedy for entropy collapse, Clip-Cov or KL-Cov (null = off)."""
    objective: Objective = Field(
        default_factory=lambda: PPOClipObjective(type="ppo_clip"),
        description="The policy objective, by `type`: " + ", ".join(f"`{name}`" for name in OBJECTIVES)
        + " (the first is the default; rlvr_cli/recipe/objectives.py, docs/objectives.md).")
    entropy_control: EntropyControlSpec | None = None
    """Steer the entropy coefficient towards a target entropy after every update (null = fixed loss.entropy_coef)."""

    @model_validator(mode="after")
    def _objective_knobs_act(self):
        """Refuse a knob the chosen objective would silently ignore (its registry entry says which)."""
        check_loss(self)
        ec = self.entropy_control
        if ec is not None and not ec.coef_min <= self.entropy_coef <= ec.coef_max:
            raise ValueError(
                f"entropy_coef ({self.entropy_coef}) is c_0 of loss.entropy_control and must lie in "
                f"[coef_min, coef_max] = [{ec.coef_min}, {ec.coef_max}]"
            )
        return self


class KLSpec(Strict):
    placement: KLPlacement = "loss"
    """`loss` (GRPO): + beta * KL_t in the loss; `reward` (PPO-RLHF): r_i <- r_i - beta * sum_t k1_t; `none` (DAPO, Dr. GRPO)."""
    estimator: KLEstimator = "k3"
    """With d = logp_ref - logp: k1 = -d, k2 = d^2/2, k3 = exp(d) - 1 - d. Used in the loss and in the logged KL."""
    beta: float = Field(0.04, ge=0, le=MAX_COEF)
    """beta: KL coefficient (forced to 0 when placement is `none`); at most 1e4, as every loss coefficient."""
    track: bool = True
    """Measure KL to the reference for the logs even when it is not in the objective (costs one forward pass)."""
    track_every: int = Field(1, ge=1, le=MAX_STEPS)
    """When KL is only tracked (not in the objective): measure it on step 1, every N steps and at eval steps; the other steps log `kl_*` as null (each measurement costs one reference forward over the step's batch)."""
    ref_reset_every: int | None = Field(None, ge=1, le=MAX_STEPS)
    """ProRL: every N steps set pi_ref <- pi_theta and reset the optimiser state (null = never)."""

    @model_validator(mode="after")
    def _beta_means_nothing_without_placement(self):
        if self.placement == "none":
            self.beta = 0.0
        return self

    @property
    def in_loss(self) -> bool:
        """KL is a term of the loss: + beta * KL_t per token (placement `loss`, beta > 0)."""
        return self.placement == "loss" and self.beta > 0

    @property
    def in_reward(self) -> bool:
        """KL is subtracted from the reward: r <- r - beta * sum_t k1_t (placement `reward`, beta > 0)."""
        return self.placement == "reward" and self.beta > 0


# --- corrections for off-policy batches (issue 41; rlvr_cli/algo/off_policy.py, docs/async.md) -------------
class M2POSpec(Strict):
    """M2PO (Zheng et al. 2025, arXiv 2510.01161; AReaL `m2_threshold`): mask the loss tokens of largest (log pi_prox/pi_behaviour)^2 until their mean over the rest is <= m2_threshold; a masked token keeps its place in the denominator."""

    m2_threshold: float = Field(0.04, gt=0, le=100)
    """tau: the bound on the mean squared log importance ratio of the kept tokens (the paper's and AReaL's 0.04)."""


class BehaviourKLSpec(Strict):
    """KL to the behaviour policy as a loss term (prime-rl `kl_tau`): + coef * KL_t(pi_theta || pi_behaviour) on every loss token."""

    coef: float = Field(..., gt=0, le=1000)
    """tau: the coefficient of the per-token KL to the policy that sampled the batch."""
    estimator: KLEstimator = "k1"
    """With d = logp_behaviour - logp: k1 = -d (prime-rl's), k2 = d^2/2, k3 = exp(d) - 1 - d."""


class OffPolicySpec(Strict):
    """Corrections for a batch the trained policy did not sample (stale under rollout.staleness, or sampled with other numerics). AReaL's decoupled PPO is rollout.old_logprobs `recompute` with rollout.is_correction (docs/async.md)."""

    m2po: M2POSpec | None = None
    """Second-moment masking of the tokens whose importance ratio is most extreme (null = off)."""
    behaviour_kl: BehaviourKLSpec | None = None
    """A KL penalty toward the behaviour policy in the loss (null = off)."""


class DynamicSamplingSpec(Strict):
    enabled: bool = False
    """DAPO dynamic sampling: drop groups whose correctness is all 0 or all 1 and refill from new prompts."""
    max_rounds: int = Field(3, ge=1, le=100)
    """Sampling rounds (of P prompts each) before training on a smaller batch."""
    metric: Literal["accuracy", "reward"] = "accuracy"
    """Filter on raw correctness from the true verifier (DAPO) or on the unshaped reward."""


class SoftPunishSpec(Strict):
    buffer: int = Field(..., ge=1, le=MAX_TOKENS)
    """B of DAPO's soft overlong punishment: lengths in (L_max - B, L_max] get ((L_max - B) - |o|)/B."""
    factor: float = Field(1.0, ge=0, le=MAX_COEF)
    """Multiplier on that penalty; at most 1e4, as every reward coefficient."""


class OverlongSpec(Strict):
    mask_truncated: bool = False
    """DAPO overlong filtering: truncated responses are left out of the loss (numerator and denominator)."""
    soft_punish: SoftPunishSpec | None = None
    """DAPO soft overlong punishment added to the reward (null = off)."""


# --- reward --------------------------------------------------------------------------------------
# How rlvr_cli.rewards finds a final answer in a response of a task without an answer marker.
ExtractMethod = Literal["boxed", "gsm8k", "last_number", "answer_tags", "answer_colon", "answer_tags_lenient",
                        "answer_colon_lenient"]


class VerifierTerm(Strict):
    type: VerifierName = "task"
    """A correctness verifier; `task` means the task's own (integer for arithmetic, countdown, math for datasets)."""
    weight: float = Field(1.0, ge=-MAX_COEF, le=MAX_COEF)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""


class FormatTerm(Strict):
    type: Literal["format"]
    """Shaped reward: 1 when the response follows the task's format (its answer marker followed by a readable answer; without a marker, an answer found by one of `reward.extract`'s methods other than `last_number`, by default a `\\boxed{}` or `####` answer), optionally after a <think> block."""
    weight: float = Field(0.1, ge=-MAX_COEF, le=MAX_COEF)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""
    think: bool = False
    """Require `<think>...</think>` (exactly one, non-empty, at the start) before the answer."""


class RandomTerm(Strict):
    type: Literal["random"]
    """Spurious control: Bernoulli(p), reproducible from the seed and the sample's identity (step, prompt id, sample index)."""
    p: float = Field(0.5, ge=0, le=1)
    """P(reward 1) of the random reward."""
    weight: float = Field(1.0, ge=-MAX_COEF, le=MAX_COEF)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""


class IncorrectTerm(Strict):
    type: Literal["incorrect"]
    """Spurious control: 1 only when the answer equals a fixed wrong label of the prompt."""
    weight: float = Field(1.0, ge=-MAX_COEF, le=MAX_COEF)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""


class FormatOnlyTerm(Strict):
    type: Literal["format_only"]
    """Spurious control: 1 whenever an answer can be extracted at all (by the task's verifier, with `reward.extract`)."""
    weight: float = Field(1.0, ge=-MAX_COEF, le=MAX_COEF)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""


class FunctionTerm(Strict):
    """Your own reward function with TRL's signature, `f(completions, **kwargs) -> list[float]`, called once per prompt's group with TRL's keyword arguments (prompts, completions, completion_ids, answer, the dataset's `reward_columns`, trainer_state) in the verifier worker pool under `reward.timeout_s`. It is your code and is NOT sandboxed (unlike the `code` verifier). A raise, a timeout or a wrong return (wrong length, None, NaN, a string) stops the run with exit 2 naming the function and the prompt (docs/own_task.md)."""

    type: Literal["function"]
    function: str = Field(..., min_length=3)
    """`module:function` (imported from the current directory or PYTHONPATH) or `path/to/file.py:function` (relative to the current directory)."""
    weight: float = Field(1.0, ge=-MAX_COEF, le=MAX_COEF)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""

    @model_validator(mode="after")
    def _reference_form(self):
        where, _, name = self.function.rpartition(":")
        if not where or not name.isidentifier():
            raise ValueError(f"function {self.function!r}: expected `module:function` or `path/to/file.py:function`")
        if not where.endswith(".py") and not all(part.isidentifier() for part in where.split(".")):
            raise ValueError(f"function {self.function!r}: {where!r} is neither a module name (a.b.c) nor a .py file")
        return self


RewardTerm = Annotated[
    Union[VerifierTerm, FormatTerm, RandomTerm, IncorrectTerm, FormatOnlyTerm, FunctionTerm], Field(discriminator="type")
]


class CodeSpec(Strict):
    """Limits of the `code` verifier's sandbox (docs/sandbox.md says what they do and do not protect against)."""

    timeout_s: float = Field(3.0, ge=0.01, le=600)
    """Wall-clock limit of one program run with its tests (plus 0.5 s for start-up); CPU time is limited to the same number of seconds, rounded up. 0.01-600 s: starting and killing a process takes milliseconds."""
    memory_mb: int = Field(512, ge=64, le=1_048_576)
    """Address-space limit (RLIMIT_AS) of each process of the program."""
    max_processes: int = Field(16, ge=1, le=4096)
    """Processes and threads the program may have at once (RLIMIT_NPROC); enforced only when it runs under its own user id (isolation, as root) or as a non-root user."""
    file_size_mb: int = Field(16, ge=1, le=1_048_576)
    """Largest file the program may write (RLIMIT_FSIZE), and with isolation the total size of its working directory."""
    isolation: Literal["auto", "basic"] = "auto"
    """`auto`: when run as root with namespaces available, also a private user id, a read-only filesystem except its own directory and no network; `basic`: only what every run gets (process limits, environment, directory, the verdict in a separate process, no sockets)."""
    python: str | None = None
    """Interpreter that runs the programs (null = the one running rlvr)."""


class LengthControlSpec(Strict):
    """Reward shaping on response length, added to the raw reward before the group baseline (rlvr_cli/algo/length_control.py; null weights = off). Correctness c_i is r_i > 0, so it needs one verifier term of positive weight."""

    brevity_bonus: float | None = Field(None, gt=0, le=10)
    """w of `brevity_bonus`: r_i += w * c_i * clamp(1 - |o_i| / mean correct |o_j| of the group, 0, 1), correct responses only (prime-rl PR #2265, correctness-gated efficiency shaping)."""
    group_length_penalty: float | None = Field(None, gt=0, le=10)
    """w of `group_length_penalty`: r_i += w * len_i, lambda_i = 1/2 - (|o_i| - min) / (max - min) over the group, len_i = lambda_i if correct else min(0, lambda_i) (Kimi k1.5, arXiv:2501.12599 §2.3.3)."""
    incorrect_offset: float | None = Field(None, ge=-10, lt=0)
    """delta of `offset_incorrect`: r_i += delta * (1 - c_i), e.g. -1 scores a wrong answer -1 ("penalise wrong"); with binary rewards only a no-std advantage sees it (x (1 - delta))."""

    def weights(self) -> tuple[float, float, float]:
        """(brevity_weight, length_penalty_weight, incorrect_offset) of `length_controlled_rewards`, 0 for null."""
        return self.brevity_bonus or 0.0, self.group_length_penalty or 0.0, self.incorrect_offset or 0.0


class RewardSpec(Strict):
    terms: list[RewardTerm] = Field(default_factory=lambda: [VerifierTerm()], min_length=1)
    """r_i = sum_k weight_k * term_k(o_i). Accuracy is always logged from the task's true verifier."""
    timeout_s: float = Field(5.0, ge=0.01, le=600)
    """Hard wall-clock limit per check of model output, enforced by killing the worker process (a code check gets at least code.timeout_s + 2.5 s). 0.01-600 s: under 10 ms a check cannot even be handed to a worker."""
    workers: int = Field(0, ge=0, le=256)
    """Verifier worker processes (0: one per CPU core, at most 4); started on the first math or code check."""
    worker_memory_mb: int = Field(4096, ge=256, le=1_048_576)
    """Address-space limit of each verifier worker: a sympy blow-up becomes an `error` outcome instead of exhausting the machine."""
    extract: list[ExtractMethod] = Field(default_factory=lambda: ["boxed", "gsm8k", "last_number"], min_length=1)
    """How the final answer is found when the task has no answer marker (datasets, chat-form tasks), methods tried in order: `boxed` the last \\boxed{...}, `gsm8k` the text after the last `####`, `last_number` the last number, `answer_tags` the last <answer>...</answer>, `answer_colon` the rest of the line after the last `Answer:`; the `_lenient` forms also read `the answer is N` and reduce words to their last number. A method that finds its sign but cannot read what follows ends the search (no fallback). Tasks with a marker use the text after its last occurrence only. The `format` term asks for one of the methods listed other than `last_number` (`boxed`/`gsm8k` when none)."""
    math_rel_tol: float = Field(5e-6, ge=0, le=0.1)
    """Math verifier: when a decimal is involved, numbers match if |a - b| <= math_rel_tol * max(|a|, |b|) (5e-6: about 6 significant digits); exact numbers must be equal."""
    truncated_is_incorrect: bool = True
    """A response cut at rollout.max_new_tokens never gave its final answer: its true outcome is `incorrect` and every answer-based term is 0."""
    code: CodeSpec = Field(default_factory=CodeSpec)
    length_control: LengthControlSpec | None = None
    """Length controls on the reward (null = off): brevity bonus, group length penalty, wrong-answer offset."""
    combination: Literal["sum", "decoupled"] = "sum"
    """How the terms become one advantage. `sum`: r_i = sum_k weight_k term_k(o_i), then the advantage (GRPO); `decoupled` (GDPO, arXiv 2601.05242, rlvr_cli/algo/reward_combination.py): each term normalised within its group (mean, std), the weighted sum divided by its batch std; overlong.soft_punish is one more term of weight 1."""

    @model_validator(mode="after")
    def _distinct_extract(self):
        if len(set(self.extract)) != len(self.extract):
            raise ValueError(f"extract lists a method twice: {self.extract}")
        return self


# --- optimisation --------------------------------------------------------------------------------
class OptimSpec(Strict):
    lr: float = Field(1e-4, gt=0, le=1)
    """Peak learning rate (AdamW), at most 1 (an AdamW update moves each weight by about lr)."""
    weight_decay: float = Field(0.0, ge=0, le=1)
    """AdamW decoupled weight decay: each update multiplies the weights by 1 - lr * weight_decay, which stays in [0, 1] with lr <= 1 only for weight_decay <= 1 (1e300 makes it -inf)."""
    betas: tuple[AdamBeta, AdamBeta] = (0.9, 0.99)
    """AdamW (beta1, beta2), each in [0, 1)."""
    adam_eps: float = Field(1e-8, ge=1e-30, le=1)
    """AdamW epsilon, added to sqrt(v) in float32: at least 1e-30 (below float32's smallest normal, 1.2e-38, it rounds to 0 and a weight whose gradient is 0 gets 0/0 = NaN); at most 1, beyond sqrt(v) of any clipped gradient."""
    schedule: Schedule = "constant"
    """Learning-rate schedule after warm-up."""
    warmup_steps: int = Field(0, ge=0, le=MAX_STEPS * 100)
    """Linear warm-up over this many optimiser updates (at most 1e9: steps x mu, the most updates a run makes with one minibatch)."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Floor of the decaying schedules as a fraction of lr."""
    grad_clip: float | None = Field(1.0, ge=1e-30, le=1e30)
    """Clip the global gradient norm to this value (null = off); 1e-30..1e30, where max_norm / norm stays a finite float32 (use null, not a huge bound, for no clipping)."""
    mu: int = Field(1, ge=1, le=100)
    """mu: optimisation passes over each rollout batch (GRPO's inner iterations)."""
    minibatches: int = Field(1, ge=1, le=4096)
    """Optimiser updates per pass: the batch is split into this many minibatches."""
    micro_batches: int = Field(1, ge=1, le=4096)
    """Gradient-accumulation chunks per minibatch (length-sorted, so they also pad less): saves memory, does not change the gradient. Rows whose loss is zero whatever the weights (A = 0 with no KL in the loss, entropy bonus or KL-Cov; or no loss token) are forwarded without a backward, in passes of at most as many rows, so a minibatch may take fewer passes."""
    max_skipped_in_row: int = Field(5, ge=1, le=MAX_STEPS)
    """A non-finite loss or gradient skips the update; this many in a row fail the run."""


class SFTSpec(Strict):
    data: str | None = None
    """JSONL of prompt/response pairs; null means fresh traces of the built-in task each step."""
    prompt_field: str = "prompt"
    """JSONL field of the prompt text."""
    response_field: str = "response"
    """JSONL field of the response text."""
    batch_size: int = Field(64, ge=1, le=100_000)
    """Examples per optimiser step (at most 1e5, as rollout.prompts_per_step: the step's examples are held in memory at once)."""


class EvalSpec(Strict):
    every: int = Field(50, ge=0, le=MAX_STEPS)
    """Evaluate every N steps (0 = only at the start and the end)."""
    at_start: bool = True
    """Evaluate the initial model as step 0 (the base model)."""
    n: int = Field(16, ge=1, le=MAX_SAMPLES)
    """Samples per prompt."""
    num_prompts: int = Field(64, ge=1, le=10_000_000)
    """Held-out prompts evaluated (the first N of the task's held-out set; at most 1e7, the largest held-out set rlvr builds, and num_prompts x n at most 1e8)."""
    temperature: Temperature | None = None
    """Sampling temperature of evaluation (0.001-10); null resolves to rollout.temperature."""
    top_p: TopP = 1.0
    """Nucleus mass of evaluation sampling (1e-6..1)."""
    max_new_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS)
    """null resolves to rollout.max_new_tokens."""
    pass_at_k: list[int] | None = None
    """k values of pass@k; null resolves to powers of two up to n."""
    maj_at_k: list[int] | None = None
    """k values of maj@k; null resolves to the same as pass_at_k."""
    seed: Seed = 1234
    """Sampling seed of evaluation, shared by every checkpoint so they are compared on equal terms."""

    @model_validator(mode="after")
    def _ks(self):
        for field in ("pass_at_k", "maj_at_k"):
            ks = getattr(self, field)
            if ks is None:
                ks = [2**i for i in range(self.n.bit_length()) if 2**i <= self.n]
                setattr(self, field, ks)
            bad = [k for k in ks if k < 1 or k > self.n]
            if bad:
                raise ValueError(f"{field} {bad} outside 1..n (n={self.n})")
        return self


class CheckpointSpec(Strict):
    every: int = Field(50, ge=0, le=MAX_STEPS)
    """Save every N steps (0 = only at the end); a run always saves its last step."""
    keep_last: int | None = Field(None, ge=1, le=MAX_STEPS)
    """Keep only the newest N checkpoints (null = keep all)."""


class TrackersSpec(Strict):
    """Optional sinks beside metrics.jsonl, which stays the source of truth (rlvr_cli/trackers.py)."""

    tensorboard: bool = False
    """TensorBoard event files in RUN_DIR/tensorboard (extra `tensorboard`); view with `tensorboard --logdir runs/`."""
    wandb: bool = False
    """Weights & Biases in offline mode under RUN_DIR/wandb (extra `wandb`); upload later with `wandb sync`."""
    trackio: bool = False
    """trackio's local store (TRACKIO_DIR, default ~/.cache/huggingface/trackio; extra `trackio`); view with `trackio show`."""
    project: str = "rlvr"
    """Project name in W&B and trackio (the run is named after its run directory)."""


class DistributedSpec(Strict):
    """How a run under `torchrun` (or `rlvr train --nproc N`) splits its work; ignored in one process."""

    strategy: Literal["ddp", "fsdp2"] = "ddp"
    """`ddp`: every rank holds the whole model, gradients are averaged (DistributedDataParallel); `fsdp2`: parameters, gradients and optimiser state sharded per decoder block (torch.distributed.fsdp.fully_shard, then the root)."""
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """`auto`: nccl on CUDA, gloo on the CPU."""
    timeout_s: float = Field(300.0, ge=1, le=1e6)
    """Seconds a collective waits for the other ranks: a rank that died or hangs makes the others fail within it. 1 s to 1e6 s (11.6 days): torch holds it as a timedelta in milliseconds, which 1e30 overflows, and a step's collectives take longer than a second on a loaded machine."""



# --- the recipe ----------------------------------------------------------------------------------
class Recipe(Strict):
    """A fully resolved recipe: what `rlvr recipes show` prints and every run saves."""

    name: str | None = None
    """Run name (the run directory is output_dir/name); null means the recipe file's name."""
    description: str = ""
    """One line saying what the recipe is for (shown by `rlvr recipes list`)."""
    algorithm: Literal["rl", "sft"] = "rl"
    """`rl`: the GRPO-family policy-gradient loop, every forward pass with the model's dropout off (so the on-policy ratio is exactly 1); `sft`: supervised fine-tuning (warm start, R1 stages), with the model's dropout as its config sets it."""
    seed: Seed = 0
    """Seeds prompts, sampling and minibatch order per step: same seed, same machine, same metrics."""
    steps: int = Field(100, ge=1, le=MAX_STEPS)
    """Training steps; an RL step is one rollout batch of P*G responses and its mu*minibatches updates (at most 1e7)."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """`auto` picks CUDA when present, else the CPU."""
    threads: int | None = Field(1, ge=1, le=MAX_THREADS)
    """torch CPU threads (at most 4096: torch takes an int32, and more threads than cores only contend). 1 suits the tiny model (on 2 cores, run two seeds side by side rather than two threads); null = torch's default."""
    output_dir: str = "runs"
    """Parent directory of run directories."""
    model: ModelSpec = Field(default_factory=ModelSpec)
    task: TaskSpec = Field(default_factory=ArithmeticTaskSpec)
    rollout: RolloutSpec = Field(default_factory=RolloutSpec)
    advantage: AdvantageSpec = Field(default_factory=AdvantageSpec)
    loss: LossSpec = Field(default_factory=LossSpec)
    kl: KLSpec = Field(default_factory=KLSpec)
    dynamic_sampling: DynamicSamplingSpec = Field(default_factory=DynamicSamplingSpec)
    overlong: OverlongSpec = Field(default_factory=OverlongSpec)
    reward: RewardSpec = Field(default_factory=RewardSpec)
    optim: OptimSpec = Field(default_factory=OptimSpec)
    sft: SFTSpec = Field(default_factory=SFTSpec)
    eval: EvalSpec = Field(default_factory=EvalSpec)
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec)
    trackers: TrackersSpec = Field(default_factory=TrackersSpec)
    distributed: DistributedSpec = Field(default_factory=DistributedSpec)
    off_policy: OffPolicySpec = Field(default_factory=OffPolicySpec)

    @model_validator(mode="after")
    def _resolve_and_cross_check(self):
        if self.loss.length_constant is None:
            self.loss.length_constant = self.rollout.max_new_tokens
        if self.eval.max_new_tokens is None:
            self.eval.max_new_tokens = self.rollout.max_new_tokens
        if self.eval.temperature is None:
            self.eval.temperature = self.rollout.temperature
        self._check_lora()
        self._check_sizes()
        sp = self.overlong.soft_punish
        if sp is not None and sp.buffer >= self.rollout.max_new_tokens:
            raise ValueError(
                f"overlong.soft_punish.buffer ({sp.buffer}) must be < rollout.max_new_tokens "
                f"({self.rollout.max_new_tokens})"
            )
        self._check_passk()
        self._check_mean_scale()
        self._check_length_control()
        self._check_combination()
        self._check_off_policy()
        if self.rollout.is_correction.mode != "none" and self.rollout.old_logprobs == "sampler":
            raise ValueError(
                "rollout.is_correction needs the trainer's recomputed log-probs beside the sampler's: "
                "set rollout.old_logprobs to auto or recompute (with `sampler`, PPO's ratio already "
                "compares against the sampler)"
            )
        batch = self.rollout.prompts_per_step * self.rollout.group_size
        if self.algorithm == "rl" and self.optim.minibatches > batch:
            raise ValueError(
                f"optim.minibatches ({self.optim.minibatches}) exceeds the responses per step "
                f"(rollout.prompts_per_step * rollout.group_size = {batch})"
            )
        return self

    def _check_sizes(self):
        """Batches that cannot fit in memory, refused before any work (MAX_BATCH_TOKENS, MAX_EVAL_RESPONSES)."""
        ro, ev = self.rollout, self.eval
        tokens = ro.prompts_per_step * ro.group_size * ro.max_new_tokens
        if tokens > MAX_BATCH_TOKENS:
            raise ValueError(f"rollout: prompts_per_step x group_size x max_new_tokens = {tokens:.3g} tokens per step; "
                             f"at most 2**31 = {MAX_BATCH_TOKENS:.3g} (its token tensors alone would not fit in memory)")
        if ev.num_prompts * ev.n > MAX_EVAL_RESPONSES:
            raise ValueError(f"eval: num_prompts x n = {ev.num_prompts * ev.n:.3g} responses; at most "
                             f"{MAX_EVAL_RESPONSES:.0e} (each is kept until the record is written)")

    def _check_lora(self):
        if self.model.lora is None:
            return
        if self.model.reference not in (None, self.model.name):
            raise ValueError("model.reference with model.lora: the reference is the base weights (the adapter "
                             "disabled), so it must be null or equal to model.name")
        if self.kl.ref_reset_every:
            raise ValueError("kl.ref_reset_every with model.lora: a ProRL reset would merge the adapter into "
                             "the reference; not supported (use full fine-tuning, or drop the reset)")

    def _check_passk(self):
        pk = self.advantage.passk
        if pk is None:
            return
        if pk.k > self.rollout.group_size:
            raise ValueError(
                f"advantage.passk.k ({pk.k}) exceeds rollout.group_size ({self.rollout.group_size}): "
                "pass@k needs at least k samples per prompt"
            )
        terms = self.reward.terms
        binary = len(terms) == 1 and isinstance(terms[0], VerifierTerm) and terms[0].weight == 1.0
        if not binary:
            raise ValueError(
                "advantage.passk needs a binary reward: reward.terms must be one verifier term of weight 1"
            )
        if self.overlong.soft_punish is not None or self.kl.placement == "reward":
            raise ValueError(
                "advantage.passk needs a binary reward: it cannot be combined with overlong.soft_punish "
                "or kl.placement = reward, which make the reward continuous"
            )

    def _check_mean_scale(self):
        """MaxRL's scale divides by the success rate: only a 0/1 reward has one."""
        if self.advantage.scale != "mean":
            return
        if self.advantage.passk is not None:
            raise ValueError(
                "advantage.scale `mean` (MaxRL) cannot be combined with advantage.passk: PKPO's rewards are not 0/1 "
                "and the analytic pass@k advantage replaces the scale"
            )
        terms = self.reward.terms
        binary = len(terms) == 1 and isinstance(terms[0], VerifierTerm) and terms[0].weight == 1.0
        shaped = self.overlong.soft_punish is not None or self.kl.placement == "reward" or self.reward.length_control is not None
        if not binary or shaped:
            raise ValueError(
                "advantage.scale `mean` (MaxRL) divides by the success rate: needs a binary reward (one verifier term "
                "of weight 1, no overlong.soft_punish, no reward.length_control, kl.placement not reward)"
            )

    def _check_combination(self):
        """GDPO normalises each term by its group's mean and std; anything that makes that inert or undefined is refused."""
        if self.reward.combination != "decoupled":
            return
        if len(self.reward.terms) < 2:
            raise ValueError("reward.combination decoupled needs at least two reward.terms (with one it is GRPO "
                             "followed by a batch-std rescale, not GDPO)")
        a = self.advantage
        if a.baseline != "group_mean" or a.scale != "group_std":
            raise ValueError("reward.combination decoupled normalises each term by its group mean and std (GDPO): "
                             "advantage.baseline must be group_mean and advantage.scale group_std (without the std, "
                             "decoupling equals the centred sum)")
        if a.passk is not None or self.reward.length_control is not None or self.kl.placement == "reward":
            raise ValueError("reward.combination decoupled normalises each reward term on its own: it cannot be "
                             "combined with advantage.passk, reward.length_control or kl.placement = reward")

    def _check_length_control(self):
        """Refuses length controls that cannot act: c_i = r_i > 0 needs one verifier term of positive weight; pass@k
        needs binary rewards; the offset alone on binary rewards is r' = (1 - delta) r + delta, which any group or
        batch baseline then std scale undoes (algo/length_control.py, item 3)."""
        lc = self.reward.length_control
        if lc is None:
            return
        terms = self.reward.terms
        if len(terms) != 1 or not isinstance(terms[0], VerifierTerm) or terms[0].weight <= 0:
            raise ValueError("reward.length_control needs reward.terms to be one verifier term of positive weight "
                             "(correctness is read as reward > 0)")
        if lc.weights() == (0.0, 0.0, 0.0):
            raise ValueError("reward.length_control sets no control: give brevity_bonus, group_length_penalty or "
                             "incorrect_offset, or set reward.length_control to null")
        if self.advantage.passk is not None:
            raise ValueError("reward.length_control makes the reward continuous: it cannot be combined with advantage.passk")
        only_offset = lc.brevity_bonus is None and lc.group_length_penalty is None
        other_shaping = self.overlong.soft_punish is not None or self.kl.placement == "reward"
        a = self.advantage
        if only_offset and not other_shaping and a.baseline != "none" and a.scale != "none":
            raise ValueError(
                f"reward.length_control.incorrect_offset alone is inert under advantage.scale {a.scale}: binary rewards "
                "become (1 - delta) r + delta and the baseline and std remove both; use scale none (Dr. GRPO, where it "
                "scales advantages by 1 - delta) or baseline none"
            )

    def _check_off_policy(self):
        """Staleness and its corrections (docs/async.md): refuse what would be silently ignored."""
        st, op = self.rollout.staleness, self.off_policy
        if self.algorithm == "sft" and (st.max or op.m2po or op.behaviour_kl):
            raise ValueError("rollout.staleness and off_policy act on RL rollouts: `algorithm: sft` samples nothing")

    @property
    def ratio_is_one_at_first_update(self) -> bool:
        """Whether PPO's ratio is 1 (up to numerics) on the first update of each step: pi_old is the policy that
        starts the update, i.e. no stale batch, or a stale one whose pi_old is recomputed (the proximal policy)."""
        return self.rollout.staleness.max == 0 or self.rollout.old_logprobs == "recompute" or (
            self.rollout.old_logprobs == "auto" and self.rollout.is_correction.mode != "none")

    def notes(self) -> list[str]:
        """Remarks about choices that are valid but easy to misread (printed, not errors)."""
        out = []
        if self.algorithm != "rl":
            return out
        on_policy = self.optim.mu == 1 and self.optim.minibatches == 1 and self.ratio_is_one_at_first_update
        if on_policy:
            out.append(
                "optim.mu = 1 with one minibatch: every update is on-policy, the ratio is 1 and "
                "clipping never acts (clip fractions will be 0)."
            )
        cov = self.loss.cov_penalty
        if cov is not None and cov.type == "kl_cov" and on_policy:
            out.append(
                "loss.cov_penalty kl_cov with optim.mu = 1 and one minibatch: logp = logp_old, so the "
                "|log-ratio| penalty and its gradient are 0 (KL-Cov is inert; Clip-Cov is not) -- exactly so "
                "only when the behaviour log-probs are recomputed (rollout.old_logprobs recompute): the "
                "sampler's can differ by round-off, and then d|x|/dx = sign(x) gives the selected token a coef-sized "
                "gradient of random sign."
            )
        if cov is not None:
            ratio = cov.clip_ratio if cov.type == "clip_cov" else cov.kl_ratio
            most = self.rollout.prompts_per_step * self.rollout.group_size * self.rollout.max_new_tokens
            most = most // self.optim.minibatches
            if ratio * most < 1:
                out.append(
                    f"loss.cov_penalty {cov.type}: {ratio:g} of at most {most} tokens per minibatch is under "
                    "one token, so exactly one token per minibatch is selected."
                )
        ic = self.rollout.is_correction
        same_numerics = (self.rollout.sample_autocast == "none" and self.model.dtype in ("auto", "float32")
                         and self.model.autocast in ("auto", "none"))
        if ic.mode != "none" and same_numerics and self.rollout.staleness.max == 0:
            out.append(
                "rollout.is_correction with rollout.sample_autocast none and float32 weights: the sampler "
                "and the trainer compute the same log-probs on CPU, so the weights are 1 and the correction "
                "is inert (on CUDA, dtype auto samples and trains under the same bf16 autocast)."
            )
        if self.rollout.sample_autocast != "none" and ic.mode == "none" and self.rollout.old_logprobs != "sampler":
            out.append(
                "rollout.sample_autocast with is_correction none: the behaviour log-probs are recomputed "
                "by the trainer, so the sampler's mismatch is measured but not corrected."
            )
        if self.advantage.passk is not None and self.advantage.passk.method == "analytic" and (
            self.advantage.baseline != "group_mean" or self.advantage.scale != "group_std"
        ):
            out.append(
                "advantage.passk analytic replaces advantage.baseline and advantage.scale: both are ignored."
            )
        pk = self.advantage.passk
        if pk is not None and pk.method == "pkpo" and pk.k == self.rollout.group_size and self.advantage.baseline != "none":
            out.append(
                "advantage.passk pkpo with k = rollout.group_size: one correct sample makes every transformed "
                "reward 1 (pass@G of the group), so no group has spread and every advantage is 0; use k < G."
            )
        kind = self.loss.objective.type
        if not isinstance(self.loss.objective, PPOClipObjective) and on_policy:
            out.append(
                f"loss.objective {kind} with optim.mu = 1 and one minibatch: rho = 1, where every objective has "
                "ppo_clip's gradient; they differ only off-policy."
            )
        out += objective_notes(self.loss)
        if self.advantage.scale == "mean" and self.advantage.baseline == "leave_one_out":
            out.append("advantage.scale mean with baseline leave_one_out is G/(G-1) times MaxRL (a rescale).")
        if self.kl.placement == "none" and self.kl.ref_reset_every:
            out.append("kl.ref_reset_every has no effect on the objective when kl.placement is none.")
        out += _off_policy_notes(self, same_numerics, on_policy)
        if self.loss.ratio == "sequence" and self.loss.aggregation != "seq_mean_token_mean":
            out.append(
                "loss.ratio = sequence (GSPO) with a token-weighted aggregation: GSPO's objective is a "
                "mean over sequences (seq_mean_token_mean)."
            )
        return out


def _off_policy_notes(recipe: Recipe, same_numerics: bool, on_policy: bool) -> list[str]:
    """The notes about rollout.staleness and off_policy (Recipe.notes)."""
    st, op, ro, out = recipe.rollout.staleness, recipe.off_policy, recipe.rollout, []
    if st.max and ro.old_logprobs == "recompute" and ro.is_correction.mode == "none":
        out.append("rollout.staleness with old_logprobs recompute and is_correction none: the ratio is taken against "
                   "the proximal policy (this step's weights) with no weight for the behaviour policy, so the batch's "
                   "staleness is neither clipped nor corrected (set is_correction for AReaL's decoupled PPO).")
    if st.max and st.max >= recipe.steps - 1:
        out.append(f"rollout.staleness.max {st.max} >= steps - 1: every batch is sampled by the initial policy.")
    if st.overlap and st.max == 0:
        out.append("rollout.staleness.overlap with max 0: step t is sampled by the weights of step t-1, so nothing "
                   "overlaps (the serial trainer plus a weight handover); max 1 samples the next step while this one trains.")
    if st.overlap and recipe.threads is None:
        out.append("rollout.staleness.overlap with threads null: the trainer and the sampler process each take torch's "
                   "default thread count and compete for the cores (threads 1 each suits a 2-core machine).")
    inert = st.max == 0 and same_numerics and on_policy
    for name, spec in (("m2po", op.m2po), ("behaviour_kl", op.behaviour_kl)):
        if spec is not None and inert:
            out.append(f"off_policy.{name} with no staleness, sampler numerics equal to the trainer's and one "
                       "on-policy update per step: the behaviour policy is the trained one, so it is inert.")
    return out


def literal_values(alias) -> tuple[str, ...]:
    """The allowed strings of one of the ``Literal`` aliases above."""
    return tuple(alias.__args__)
