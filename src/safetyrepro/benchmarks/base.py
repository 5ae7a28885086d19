"""The benchmark interface, item subsets, and label extraction shared by the benchmarks."""

from __future__ import annotations

import random
import re
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetyrepro.core.scorer_names import JUDGE, RULES, UNPARSED

if TYPE_CHECKING:
    import pandas as pd

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# Only a bounded window of a response is searched: keeps hostile megabyte outputs cheap.
SCAN_CHARS = 4000


@dataclass(frozen=True)
class DataFile:
    """One pinned data file and where `safetyrepro fetch-data` gets it: a commit of a public GitHub
    repository (a mirror with raw.githubusercontent.com's layout may stand in), or else its `url`.

    Attributes:
        path: its path under the data folder, inside the benchmark's folder.
        sha256: its SHA-256; a fetched file that differs is refused.
        repo: the GitHub repository ("owner/name").
        commit: the commit of that repository.
        upstream_path: the file's path in that repository.
        url: any other address (given instead of the three above).
    """

    path: str
    sha256: str
    repo: str = ""
    commit: str = ""
    upstream_path: str = ""
    url: str = ""

    def __post_init__(self) -> None:
        if bool(self.url) == bool(self.repo and self.commit and self.upstream_path):
            raise ValueError(f"{self.path}: give either repo, commit and upstream_path, or url")

    @property
    def source(self) -> str:
        """Where the file comes from, in one string."""
        return self.url or f"{self.repo}@{self.commit}:{self.upstream_path}"


def github_files(
    repo: str, commit: str, folder: str, upstream_dir: str, hashes: Mapping[str, str]
) -> tuple[DataFile, ...]:
    """Pins of files of one repository commit, kept under the same names in `folder` as under `upstream_dir`."""
    return tuple(
        DataFile(f"{folder}/{name}", sha, repo, commit, f"{upstream_dir}{name}") for name, sha in hashes.items()
    )


@dataclass(frozen=True)
class Item:
    """One evaluated item, ready to be rendered into any template.

    Attributes:
        item_id: unique within the benchmark.
        stratum: what the subset draw stratifies by: the benchmark's `strata` values joined by "/" ("safe/homonyms").
        text: the item's own text (question with its context; no options, instructions or shots), what
            its item_hash identifies across harnesses.
        question: fills the template's {question}.
        answer_format: fills the template's {answer_format} (how to answer: a letter, Yes or No, ...).
        labels: the labels an answer may give.
        gold: the correct label.
        candidates: each label's continuation, scored on the logprob path.
        logprob_fields: template fields overridden on that path (CrowS-Pairs scores whole sentences after a
            neutral prompt rather than a question about them).
        meta: anything else its parsing and scoring read (the options' texts `extract` reads, BBQ's condition).
    """

    item_id: str
    stratum: str
    text: str
    question: str
    answer_format: str
    labels: tuple[str, ...]
    gold: str
    candidates: Mapping[str, str]
    logprob_fields: Mapping[str, str] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Presentation:
    """How an item's options are shown and scored: an order applied on top of the benchmark's own
    (as given, reversed, or shuffled per item by `seed`), and the log-likelihood candidates (the
    option letters, or the option texts as lm-evaluation-harness's multiple-choice tasks score them)."""

    order: str = "as_given"
    seed: int = 0
    candidates: str = "letters"

    def arrange(self, options: Sequence[Any], item_id: str) -> list[Any]:
        """The options in this presentation's order."""
        if self.order == "reversed":
            return list(reversed(options))
        arranged = list(options)
        if self.order == "shuffled":
            item_rng(self.seed, f"order:{item_id}").shuffle(arranged)
        return arranged

    def scored(self, labels: Sequence[str], options: Sequence[str]) -> dict[str, str]:
        """Each label's log-likelihood continuation: " A", or " <option text>"."""
        return {label: f" {text if self.candidates == 'text' else label}" for label, text in zip(labels, options)}


AS_GIVEN = Presentation()


class Benchmark(ABC):
    """One benchmark: its data, prompts, label extraction, correctness and score.

    `presentation_acts` names, per presentation mechanism (option_order, answer_formulation), the
    scoring paths on which it changes this benchmark's prompts or candidates; elsewhere an axis of
    that mechanism stays at its default (envelope.Envelope.acts). `data_files` pins every file `load`
    reads (under `folder`); `metric_names` and `metric_prefixes` name every key `metrics` may return
    (no axis may take them); `labels_are_decisions` says that an item row's `label` is a decision of
    its own (XSTest's response classes), which the item-stability analysis then counts in place of
    `correct`. `scorers` names the registered scorers (safetyrepro.scorers) that label its free-form
    responses (a declared scorer axis picks one, docs/scorers.md), "rules" (its own `extract`) first; a
    registered scorer that declares this benchmark among its `benchmarks` is added after them as the
    registry is built. `scorer_arguments` gives a scorer the keyword arguments it is made with for this
    benchmark (the judge's `question`: a module with `question(item, reply, labels)` and
    `read(answer, item, labels)`; by default the option question of `safetyrepro.benchmarks.judge_question`);
    a benchmark without a judge leaves "judge" out of `scorers`.
    `strata` names the columns of `load`'s frame the item subsets are stratified by, outermost first
    (by default its own `stratum` column): an item's stratum is their values joined by "/", and the
    draw keeps the share of every group of every level within one item (`draw_subset`).
    `posed_fields` names what `safetyrepro parse` reads from a line that gives no item id to pose its item
    (`posed_item`): its `prompt` and, for items that show options, their `options`.
    """

    name: str
    folder: str
    task: str
    data_files: tuple[DataFile, ...] = ()
    default_labels: tuple[str, ...] = tuple(LETTERS[:8])
    presentation_acts: Mapping[str, tuple[str, ...]] = {}
    metric_names: tuple[str, ...] = ()
    metric_prefixes: tuple[str, ...] = ()
    labels_are_decisions: bool = False
    scorers: tuple[str, ...] = (RULES, JUDGE)
    scorer_arguments: Mapping[str, Mapping[str, Any]] = {}
    strata: tuple[str, ...] = ("stratum",)
    posed_fields: tuple[str, ...] = ("prompt", "options")

    @abstractmethod
    def load(self, data_dir: Path) -> pd.DataFrame:
        """Read every item of the benchmark's files.

        Args:
            data_dir: the run's data folder; the files are under `data_dir / folder`, as `data_files` pins them.

        Returns:
            One row per item, with at least `item_id` (unique) and the `strata` columns (what subsets are
            stratified by).

        Raises:
            DataError: a file is missing, unreadable or malformed (the message names file and row).

        What it returns may depend on nothing but the files under `data_dir / folder`: a process draws
        each item subset from them once (`item_set`) while they stay as they are.
        """

    @abstractmethod
    def make_item(self, row: Mapping[str, Any], seed: int, presentation: Presentation = AS_GIVEN) -> Item:
        """Turn one data row into an Item.

        Args:
            row: one row of `load`'s frame, to read, not change (its lists and dicts are those of the
                drawn subset the process keeps).
            seed: the run's subset seed; it fixes the benchmark's own shuffling.
            presentation: how the options are ordered and formulated (the presentation axes).

        Returns:
            The item: its prompt pieces, labels, gold label and logprob candidates.
        """

    def posed_item(self, prompt: str, options: Sequence[str] = ()) -> Item:
        """An item known by its text and the options it was shown with, not by its id (`safetyrepro parse` given
        `posed_fields`): what `extract` reads of it is as `make_item` makes it (labels A, B, ... for the
        options, with their texts; `default_labels` where there are none); it has no id, stratum or gold label.
        A benchmark whose `extract` reads more of its items overrides it.
        """
        labels = tuple(LETTERS[: len(options)]) if options else self.default_labels
        meta = {"options": dict(zip(labels, options))} if options else {}
        return Item("", "", prompt, prompt, "", labels, "", {}, meta=meta)

    def extract(self, response: str, item: Item | None = None) -> str:
        """The label a free-form response gives; never raises.

        Args:
            response: the model's text.
            item: the item answered; with it, only its labels count and its option texts are recognised too.

        Returns:
            One of the item's labels, or "unparsed".
        """
        if item is None:
            return extract_choice(response, self.default_labels)
        return extract_choice(response, item.labels, item.meta.get("options"))

    def is_correct(self, label: str, item: Item) -> bool:
        """Whether an extracted label is the right answer.

        Args:
            label: what `extract` or `choose` returned.
            item: the item answered.

        Returns:
            True when the label is the item's gold label (a benchmark may define correct otherwise).
        """
        return label == item.gold

    def choose(self, logliks: Mapping[str, float], item: Item) -> str:
        """The label picked on the logprob path.

        Args:
            logliks: each label's candidate's summed log-likelihood.
            item: the item answered.

        Returns:
            The label of the largest log-likelihood (argmax).
        """
        return max(logliks, key=logliks.__getitem__)

    def metrics(self, rows: pd.DataFrame, items: Mapping[str, Item]) -> dict[str, float]:
        """Extra per-cell metrics beyond the score (e.g. BBQ's bias scores); none by default.

        Args:
            rows: the cell's item rows (one per item and seed: `item_id`, `label`, `correct`, ...).
            items: the cell's items by id.

        Returns:
            Metric name to value, each name declared in `metric_names` or starting with one of `metric_prefixes`.
        """
        return {}

    def shot_answer(self, item: Item, scoring: str) -> str:
        """The answer shown after a few-shot example.

        Args:
            item: the few-shot example, drawn from the pool.
            scoring: "freeform" or "logprob", the path of the cell it is shown in.

        Returns:
            The gold label on the free-form path, the gold label's candidate (stripped) on the logprob path.
        """
        return item.candidates[item.gold].strip() if scoring == "logprob" else item.gold

    def item_set(
        self, data_dir: Path, n_items: int, pool_size: int, seed: int, where: str, presentation: Presentation
    ) -> ItemSet:
        """Load the data and draw the fixed evaluated items and the disjoint few-shot pool.

        Args:
            data_dir: the run's data folder.
            n_items: how many items are evaluated.
            pool_size: how many items form the few-shot pool, disjoint from them.
            seed: the run's subset seed; with the benchmark's name it seeds the draw (`subset`).
            where: the config key a too-large size is reported under.
            presentation: how the options are ordered and formulated (it shapes the items, not the draw).

        Returns:
            The evaluated items and the pool, as `make_item` makes them.

        Raises:
            DataError: a file is missing or malformed, an item id appears twice, a stratum is missing, or
                the sizes exceed the items.
        """
        evaluated, pool = self.subset(data_dir, n_items, pool_size, seed, where)
        make = lambda rows: [self.make_item(row, seed, presentation) for row in rows.to_dict("records")]  # noqa: E731
        return ItemSet(self, make(evaluated), make(pool))

    def subset(
        self, data_dir: Path, n_items: int, pool_size: int, seed: int, where: str
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The rows of the evaluated items and of the few-shot pool (`item_set`), drawn by `draw_subset` with a
        numpy Generator seeded from `seed` and the benchmark's name; read them, never change them."""
        from safetyrepro.benchmarks import subsets

        state = subsets.folder_state(self, data_dir)
        return subsets.drawn(subsets.Identity(self), Path(data_dir), n_items, pool_size, seed, where, state)

    def items_by_id(
        self, data_dir: Path, item_ids: Collection[str], seed: int, presentation: Presentation = AS_GIVEN
    ) -> dict[str, Item]:
        """The items of those ids that are in the benchmark's data, made from the rows `item_set` draws from as it
        makes them (the same items a cell of `seed` and `presentation` evaluates, whatever subset holds them).

        Raises:
            DataError: a file is missing or malformed, or an item id appears twice.
        """
        from safetyrepro.benchmarks import subsets

        frame = subsets.loaded(subsets.Identity(self), Path(data_dir), subsets.folder_state(self, data_dir))
        found = frame[frame["item_id"].isin(list(item_ids))]
        strata = [subsets.stratum_name(values) for values in found[list(self.strata)].itertuples(index=False)]
        rows = found.assign(stratum=strata).to_dict("records")
        return {row["item_id"]: self.make_item(row, seed, presentation) for row in rows}


@dataclass
class ItemSet:
    """A benchmark's fixed evaluated items and its disjoint few-shot pool."""

    benchmark: Benchmark
    items: list[Item]
    pool: list[Item]


def item_rng(seed: int, item_id: str) -> random.Random:
    """A per-item random generator, stable across runs and independent of item order."""
    return random.Random(f"{seed}:{item_id}")


_CUE = re.compile(r"answer(?:\s+is)?\s*[:=\-]?\s*[\"'(\[*]*\s*([A-Za-z]+)\b", re.IGNORECASE)
_FIRST = re.compile(r"\s*[\"'(\[*]*([A-Za-z]+)([^A-Za-z]?)")
_WORD = re.compile(r"[A-Za-z]+")
_MARKED_LETTER = re.compile(r"(?:\(([A-Z])\)|\b(?i:option)\s+([A-Z])\b)")
_LETTER_END = ".):,]*\n"


def extract_choice(response: str, labels: Sequence[str], options: Mapping[str, str] | None = None) -> str:
    """Find which of `labels` (letters, or words such as Yes/No) a free-form response picks.

    Evidence, strongest first: the last explicit "Answer: X" cue; the response's first word
    (a lone letter only when followed by punctuation or the end, so "I think" is no answer "I"),
    unless another label is marked too; a label that is the only one marked as "(X)"/"option X"
    or, for word labels, mentioned at all; the only option whose text appears in the response.
    Single letters must be upper case. Conflicting labels with no cue give "unparsed", as does
    anything else.
    """
    if not isinstance(response, str):
        return UNPARSED
    text = response if len(response) <= 2 * SCAN_CHARS else response[:SCAN_CHARS] + "\n" + response[-SCAN_CHARS:]
    lookup = {label.lower(): label for label in labels}

    def label_of(token: str) -> str | None:
        return lookup.get(token.lower()) if len(token) > 1 or token.isupper() else None

    cues = [label_of(m.group(1)) for m in _CUE.finditer(text)]
    cues = [c for c in cues if c]
    if cues:
        return cues[-1]
    mentioned = {label_of(m.group(1) or m.group(2)) for m in _MARKED_LETTER.finditer(text)}
    mentioned |= {label_of(w) for w in _WORD.findall(text) if len(w) > 1}
    mentioned.discard(None)
    first = _FIRST.match(text)
    if first and (label := label_of(first.group(1))):
        if len(first.group(1)) > 1 or not first.group(2) or first.group(2) in _LETTER_END:
            return label if mentioned <= {label} else UNPARSED
    if len(mentioned) == 1:
        return mentioned.pop()
    if options and not mentioned:
        lowered = text.lower()
        hits = [label for label, option in options.items() if option and option.lower() in lowered]
        if len(hits) == 1:
            return hits[0]
    return UNPARSED


def lettered(options: Sequence[str]) -> str:
    """Options rendered one per line as "A. text"."""
    return "\n".join(f"{LETTERS[i]}. {text}" for i, text in enumerate(options))
